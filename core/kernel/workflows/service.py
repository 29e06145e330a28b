"""Workflows: who has which, what starts a run, and the executor that drives them (ADR 0091).

A person's workflows are their own routines (saved by ``save_workflow`` from a
chat) and, for the owner, the wired extensions' (manifest ``workflows:`` and
``WorkflowProvider``). A run starts by a cron timer (fired once per fire: the
run's id names it, ``WorkflowStore.fire``), an event on its topic (once per
event), ``/run NAME`` or the model's ``run_workflow``; a background task
(``request_agent_background``) is a run of one agent step. A member sees and
runs only their own.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from core.config import WorkflowsSettings
from core.events import EventBus
from core.events.models import Event
from core.extensions.contract import TurnContext
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.workflow_section import WorkflowDefinition
from core.extensions.sdk import next_fire, resolve_zone
from core.kernel.workflows.executor import NO_RECORDING, Executor, Powers, Recording
from core.kernel.workflows.store import LIVE, RunRow, WorkflowRow, WorkflowStore
from core.runtime.errors import HearthError

__all__ = ["BACKGROUND", "WorkflowError", "Workflows", "describe_errors", "workflow_id"]

log = logging.getLogger("core.kernel.workflows")

BACKGROUND = "background"  # the workflow id of background tasks (one agent step each)
USER_SOURCE = "user"


class WorkflowError(HearthError, ValueError):
    """A request about workflows that cannot be done; the message says why."""


def workflow_id(person: str, name: str) -> str:
    """The owner's workflows by name; a member's as ``PERSON/NAME``."""
    return f"{person}/{name}" if person else name


def describe_errors(error: ValidationError) -> str:
    """Pydantic's errors as ``field: message`` lines (``steps.2.tool: …``)."""
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


class Workflows:
    """The kernel's workflows: the store, the triggers and the executor."""

    def __init__(
        self,
        store: WorkflowStore,
        powers: Powers,
        settings: WorkflowsSettings,
        *,
        bus: EventBus,
        timezone: str = "local",
        recording: Recording = NO_RECORDING,
    ) -> None:
        self.store = store
        self.settings = settings
        self.zone = resolve_zone(timezone)
        self.bus = bus
        self.executor = Executor(
            store, powers, settings, timezone=timezone, ticks=self.fire_due, recording=recording
        )
        self._topics: set[str] = set()

    async def open(self) -> None:
        """Open the store and forget runs finished longer ago than ``keep_days``."""
        await self.store.ready()
        pruned = await self.store.prune(time.time() - self.settings.keep_days * 86400.0)
        if pruned:
            log.info(
                "workflows: %d finished runs older than %d days forgotten",
                pruned,
                self.settings.keep_days,
            )

    async def aclose(self) -> None:
        await self.executor.stop()
        await self.store.aclose()

    # ------------------------------------------------------------ definitions

    async def sync_extensions(self, records: Iterable[ExtensionRecord]) -> None:
        """The wired extensions' workflows become the owner's (a changed definition
        replaces the kept one; one no longer declared is forgotten); event triggers
        are subscribed."""
        for record in records:
            found = _declared(record)
            kept: set[str] = set()
            for definition in found:
                row = self._row("", definition, record.ext_id, None, None)
                existing = await self.store.workflow(row.id)
                if existing is not None and existing.source != record.ext_id:
                    log.warning(
                        "workflow %s of %s ignored: %s has one of that name",
                        row.id,
                        record.ext_id,
                        existing.source,
                    )
                    continue
                if existing is not None and existing.definition == row.definition:
                    kept.add(row.id)
                    continue
                await self.store.save_workflow(row, replace=True)
                kept.add(row.id)
            await self.store.drop_workflows(record.ext_id, kept)
        await self._subscribe_triggers()

    async def save_user_workflow(
        self, turn: TurnContext, data: dict[str, Any], *, replace: bool = False
    ) -> WorkflowRow:
        """A person's own routine, checked (``WorkflowError`` naming the field at fault)
        and kept; its runs speak where it was made."""
        try:
            definition = WorkflowDefinition.model_validate(data)
        except ValidationError as exc:
            raise WorkflowError(describe_errors(exc)) from None
        person = turn.person_key or ""
        row = self._row(person, definition, USER_SOURCE, turn.channel_id, turn.user_id)
        existing = await self.store.workflow(row.id)
        if existing is not None and (existing.source != USER_SOURCE or not replace):
            raise WorkflowError(
                f"a workflow named {definition.name!r} exists already "
                + ("(an extension's)" if existing.source != USER_SOURCE else "(say to replace it)")
            )
        await self.store.save_workflow(row, replace=replace)
        await self._subscribe_triggers()
        return row

    def _row(
        self,
        person: str,
        definition: WorkflowDefinition,
        source: str,
        channel_id: str | None,
        user_id: str | None,
    ) -> WorkflowRow:
        now = time.time()
        return WorkflowRow(
            id=workflow_id(person, definition.name),
            person=person,
            name=definition.name,
            source=source,
            definition=definition.model_dump(mode="json", exclude_defaults=True),
            channel_id=channel_id,
            user_id=user_id,
            paused=False,
            next_at=self._next_at(definition, now),
            created_at=now,
        )

    def _next_at(self, definition: WorkflowDefinition, after: float) -> float | None:
        trigger = definition.trigger
        if trigger is None or trigger.cron is None:
            return None
        zone = resolve_zone(trigger.timezone) if trigger.timezone else self.zone
        moment = datetime.fromtimestamp(after, UTC)
        return next_fire(trigger.cron, moment, zone).timestamp()

    # ------------------------------------------------------------ triggers

    async def fire_due(self) -> None:
        """Each due timer starts one run (once, whichever process fires it)."""
        now = time.time()
        for workflow in await self.store.due(now):
            definition = WorkflowDefinition.model_validate(workflow.definition)
            fire = workflow.next_at or now
            run = self._run_row(workflow, f"{workflow.id}@{int(fire)}", "cron", "")
            if await self.store.fire(workflow, run, self._next_at(definition, now)):
                log.info("workflow %s fired (run %s)", workflow.id, run.id)

    async def _subscribe_triggers(self) -> None:
        for workflow in await self.store.workflows():
            trigger = workflow.definition.get("trigger") or {}
            topic = trigger.get("event")
            if topic and topic not in self._topics:
                self._topics.add(topic)
                self.bus.subscribe(topic, self._on_event, f"kernel.workflows.{topic}")

    async def _on_event(self, event: Event) -> None:
        for workflow in await self.store.workflows():
            trigger = workflow.definition.get("trigger") or {}
            if trigger.get("event") != event.topic or workflow.paused:
                continue
            run = self._run_row(
                workflow,
                f"{workflow.id}@ev{event.id}",
                f"event {event.topic}",
                _payload_text(event.payload),
            )
            if await self.store.add_run(run):
                self.executor.wake()

    # ------------------------------------------------------------ runs

    async def start(self, turn: TurnContext, name: str, text: str = "") -> RunRow:
        """``/run NAME`` or ``run_workflow``: a run of the person's workflow, speaking
        where they asked (``WorkflowError`` when they have no such workflow)."""
        workflow = await self.find(turn, name)
        base = self._run_row(workflow, f"{workflow.id}@{uuid.uuid4().hex[:8]}", "manual", text)
        run = _speaking_at(base, turn)
        await self.store.add_run(run)
        self.executor.wake()
        return run

    async def background(self, prompt: str, source: str, correlation_id: str | None) -> RunRow:
        """A background task (seed 002's task engine): a run of one agent step, the
        owner's, listed and cancellable, its answer kept as the run's result."""
        definition = {"name": BACKGROUND, "steps": [{"id": "answer", "agent": prompt}]}
        run_id = f"task-{correlation_id or uuid.uuid4().hex[:8]}"
        now = time.time()
        run = RunRow(
            run_id,
            BACKGROUND,
            "",
            "pending",
            f"background task from {source}",
            "",
            definition,
            None,
            None,
            None,
            None,
            None,
            now,
            now,
        )
        await self.store.add_run(run)
        self.executor.wake()
        return run

    def _run_row(self, workflow: WorkflowRow, run_id: str, trigger: str, text: str) -> RunRow:
        now = time.time()
        return RunRow(
            run_id,
            workflow.id,
            workflow.person,
            "pending",
            trigger,
            text,
            workflow.definition,
            workflow.channel_id,
            workflow.user_id,
            None,
            None,
            None,
            now,
            now,
        )

    async def find(self, turn: TurnContext, name: str) -> WorkflowRow:
        """The person's workflow called ``name`` (or by its id)."""
        person = turn.person_key or ""
        found = await self.store.workflow(workflow_id(person, name.strip()))
        if found is None or found.person != person:
            raise WorkflowError(f"You have no workflow {name.strip()!r}. /workflows lists yours.")
        return found

    async def find_run(self, turn: TurnContext, run_id: str) -> RunRow | None:
        run = await self.store.run(run_id.strip())
        return run if run is not None and run.person == (turn.person_key or "") else None

    async def cancel(self, turn: TurnContext, target: str) -> list[str]:
        """Cancel a run by id, or the live runs of a workflow by name; the ids cancelled."""
        run = await self.find_run(turn, target)
        runs = [run] if run is not None else []
        if run is None:
            workflow = await self.find(turn, target)
            runs = await self.store.runs(workflow_id=workflow.id, limit=100)
        cancelled = []
        for row in runs:
            if row.status in LIVE and await self.store.set_run(row.id, "cancelled"):
                self.executor.cancel(row.id)
                cancelled.append(row.id)
        return cancelled


def _declared(record: ExtensionRecord) -> list[WorkflowDefinition]:
    """An extension's workflows: its manifest's and its ``get_workflows()`` answer."""
    manifest = record.manifest
    found = list(manifest.workflows) if manifest is not None else []
    getter = getattr(record.instance, "get_workflows", None)
    if callable(getter):
        try:
            for index, data in enumerate(getter()):
                try:
                    found.append(WorkflowDefinition.model_validate(data))
                except ValidationError as exc:
                    log.warning(
                        "%s: get_workflows()[%d]: %s", record.ext_id, index, describe_errors(exc)
                    )
        except Exception as exc:
            log.warning("%s: get_workflows() failed: %s", record.ext_id, exc)
    return found


def _speaking_at(run: RunRow, turn: TurnContext) -> RunRow:
    if not (turn.channel_id and turn.user_id):
        return run
    return replace(run, channel_id=turn.channel_id, user_id=turn.user_id)


def _payload_text(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, sort_keys=True)
