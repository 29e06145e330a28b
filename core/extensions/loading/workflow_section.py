"""A workflow's definition: the manifest's ``workflows:`` section, a
``WorkflowProvider``'s answer and a person's own routine share it (ADR 0091).

A workflow is a named list of steps with an optional trigger. Each step does
one thing, named by the key it carries: ``tool`` (call a tool with ``args``),
``agent`` (run the orchestrator on a prompt), ``ask`` (a question to the
person: yes/no, one of ``options``, or free text with ``input: true``),
``wait`` (a duration, ``10m``) or ``until`` (a time of day, ``09:00``, or an ISO
instant), ``notify`` (a message to the person) or ``parallel`` (steps run
side by side). ``when`` makes a step conditional on an earlier one's result.
Text fields may name earlier results as ``{{STEP_ID}}``, and the trigger's
input as ``{{input}}``. Validation errors name the field (``steps.2.tool``);
the loader adds the file.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.events.topics import SystemTopics
from core.extensions.sdk import CronError, check_cron

__all__ = [
    "ACTIONS",
    "TEMPLATE",
    "Condition",
    "Step",
    "Trigger",
    "WorkflowDefinition",
    "parse_duration",
    "step_ids",
    "unique_workflows",
]

ACTIONS = ("tool", "agent", "ask", "wait", "until", "notify", "parallel")
TEMPLATE = re.compile(r"\{\{\s*([A-Za-z_][\w-]*)\s*\}\}")
_ID = r"^[A-Za-z_][\w-]{0,63}$"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_WAIT_S = 366 * 86400.0
_SIDE_BY_SIDE = ("tool", "agent", "notify")


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``2h``, ``1d`` in seconds; ``ValueError`` naming the text."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 30s, 10m, 2h or 1d")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_WAIT_S:
        raise ValueError(f"{text!r} is longer than a year")
    return seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Condition(_Strict):
    """``when: {step: ID, equals: VALUE}`` (or ``contains``, ``not_equals``): the
    step runs only when the earlier step's result matches (case-insensitively)."""

    step: str = Field(pattern=_ID)
    equals: str | None = None
    contains: str | None = None
    not_equals: str | None = None

    @model_validator(mode="after")
    def _one_test(self) -> Condition:
        tests = [t for t in (self.equals, self.contains, self.not_equals) if t is not None]
        if len(tests) != 1:
            raise ValueError("give exactly one of equals, contains, not_equals")
        return self

    def holds(self, result: str) -> bool:
        value = result.strip().lower()
        if self.equals is not None:
            return value == self.equals.strip().lower()
        if self.contains is not None:
            return self.contains.strip().lower() in value
        return value != (self.not_equals or "").strip().lower()


class Step(_Strict):
    """One step: an ``id`` and exactly one action (``ACTIONS``)."""

    id: str = Field(pattern=_ID)
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = None
    ask: str | None = None
    options: list[str] = Field(default_factory=list, max_length=10)
    input: bool = False
    wait: str | None = None
    until: str | None = None
    notify: str | None = None
    parallel: list[Step] | None = Field(default=None, min_length=1, max_length=10)
    when: Condition | None = None
    retries: int | None = Field(default=None, ge=0, le=10)

    @field_validator("wait")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @field_validator("until")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^\d{1,2}:\d{2}$", value.strip()):
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{value!r} is neither HH:MM nor an ISO date-time") from None
        return value

    @model_validator(mode="after")
    def _one_action(self) -> Step:
        given = [name for name in ACTIONS if getattr(self, name) is not None]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(f"a step does exactly one of {', '.join(ACTIONS)} (found: {found})")
        if self.args and self.tool is None:
            raise ValueError("args belong to a tool step")
        if (self.options or self.input) and self.ask is None:
            raise ValueError("options and input belong to an ask step")
        if self.parallel is not None and any(s.action not in _SIDE_BY_SIDE for s in self.parallel):
            raise ValueError("a parallel group holds tool, agent and notify steps only")
        return self

    @property
    def action(self) -> str:
        return next(name for name in ACTIONS if getattr(self, name) is not None)


class Trigger(_Strict):
    """When a workflow starts by itself: ``cron`` (with an optional ``timezone``)
    or an ``event`` topic. Without a trigger it runs on ``/run NAME`` or when the
    model calls ``run_workflow``."""

    cron: str | None = None
    timezone: str | None = None
    event: str | None = Field(default=None, pattern=r"^[a-z][\w.-]*$")

    @model_validator(mode="after")
    def _one(self) -> Trigger:
        if (self.cron is None) == (self.event is None):
            raise ValueError("give either cron or event")
        if self.cron is not None:
            try:
                check_cron(self.cron)  # croniter is imported here, not with every manifest
            except CronError:
                raise ValueError(f"invalid cron expression {self.cron!r}") from None
        if self.event is not None and self.event.startswith(SystemTopics.PREFIX):
            raise ValueError(f"{self.event!r}: system topics cannot start a workflow")
        return self


class WorkflowDefinition(_Strict):
    """``{name, description, trigger, steps}``; step ids are unique, and a template or
    a ``when`` names only steps that come before (a parallel group's members count
    after the group)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,47}$")
    description: str = ""
    trigger: Trigger | None = None
    steps: list[Step] = Field(min_length=1, max_length=50)

    @model_validator(mode="after")
    def _references(self) -> WorkflowDefinition:
        seen: set[str] = set()
        for index, step in enumerate(self.steps):
            group = step.parallel or [step]
            for member in group:
                where = f"steps.{index}" + (
                    f".parallel.{group.index(member)}" if step.parallel else ""
                )
                for name in _named(member):
                    if name != "input" and name not in seen:
                        raise ValueError(f"{where}: {{{{{name}}}}} names no earlier step")
                if member.when is not None and member.when.step not in seen:
                    raise ValueError(f"{where}.when: {member.when.step!r} is no earlier step")
            ids = [m.id for m in group] + ([step.id] if step.parallel else [])
            for step_id in ids:
                if step_id in seen or ids.count(step_id) > 1:
                    raise ValueError(f"steps.{index}: step id {step_id!r} is used twice")
            seen.update(ids)
        return self


def _named(step: Step) -> set[str]:
    texts = [step.agent, step.ask, step.notify, *[str(v) for v in step.args.values()]]
    return {name for text in texts if text for name in TEMPLATE.findall(text)}


def step_ids(definition: WorkflowDefinition) -> list[str]:
    """Every step id, in the order they run (a group's members after the group)."""
    ids: list[str] = []
    for step in definition.steps:
        ids.append(step.id)
        ids.extend(member.id for member in step.parallel or [])
    return ids


def unique_workflows(value: list[WorkflowDefinition]) -> list[WorkflowDefinition]:
    """A manifest's workflows have names of their own (a validator of ``Manifest``)."""
    names = [workflow.name for workflow in value]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"workflow {', '.join(twice)} defined more than once")
    return value
