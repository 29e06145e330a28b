"""``/workflows``, ``/workflow show|pause|resume|cancel|delete ID`` and ``/run NAME``,
and the model's ``run_workflow``, ``save_workflow`` and ``list_workflows`` (ADR 0091).

Each answers for the person of the turn: a member sees, runs and changes only
their own workflows and runs. ``save_workflow`` has side effects, so under the
``safe`` profile the person is asked before a routine is saved — and the
question shows the routine.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool

from core.extensions.contract import Command, TurnContext
from core.extensions.sdk import side_effects
from core.extensions.tool_failures import tool_error_message
from core.kernel.workflows.service import USER_SOURCE, WorkflowError, Workflows
from core.kernel.workflows.store import RunRow, WorkflowRow

__all__ = ["workflow_commands", "workflow_tools"]

USAGE = "Usage: /workflow show|pause|resume|cancel|delete ID"


def workflow_commands(workflows: Workflows) -> list[Command]:
    """The person's commands over their workflows."""

    async def list_(args: str, turn: TurnContext) -> str:
        return await listing(workflows, turn)

    async def workflow(args: str, turn: TurnContext) -> str:
        verb, _, target = args.strip().partition(" ")
        if verb not in ("show", "pause", "resume", "cancel", "delete") or not target.strip():
            return USAGE
        try:
            return await _act(workflows, turn, verb, target.strip())
        except WorkflowError as exc:
            return str(exc)

    async def run(args: str, turn: TurnContext) -> str:
        name, _, text = args.strip().partition(" ")
        if not name:
            return "Usage: /run NAME [input]"
        try:
            started = await workflows.start(turn, name, text.strip())
        except WorkflowError as exc:
            return str(exc)
        return f"Started {name} (run {started.id}); /workflow show {name} follows it."

    return [
        Command("workflows", "your workflows and background tasks, next run, last result", list_),
        Command("workflow", "show|pause|resume|cancel|delete ID: one of your workflows", workflow),
        Command("run", "start one of your workflows now: /run NAME [input]", run),
    ]


async def listing(workflows: Workflows, turn: TurnContext) -> str:
    person = turn.person_key or ""
    rows = await workflows.store.workflows(person)
    lines = ["Your workflows:" if rows else "You have no workflows yet."]
    for row in rows:
        last = await workflows.store.runs(workflow_id=row.id, limit=1)
        lines.append(f"- {row.name}: {_trigger(row)}; last run: {_last(last)}")
    tasks = [
        r
        for r in await workflows.store.runs(person=person, limit=10)
        if r.workflow_id == "background"
    ]
    if tasks:
        lines.append("Background tasks:")
        lines.extend(f"- {r.id}: {r.status}{_outcome(r)}" for r in tasks)
    return "\n".join(lines)


async def _act(workflows: Workflows, turn: TurnContext, verb: str, target: str) -> str:
    if verb == "cancel":
        cancelled = await workflows.cancel(turn, target)
        return f"Cancelled {', '.join(cancelled)}." if cancelled else f"Nothing of {target} runs."
    if verb == "show":
        run = await workflows.find_run(turn, target)
        if run is not None:
            return await _show_run(workflows, run)
    row = await workflows.find(turn, target)
    if verb == "show":
        return await _show(workflows, row)
    if verb == "delete":
        if row.source != USER_SOURCE:
            return f"{row.name} comes with the extension {row.source}; /workflow pause it instead."
        await workflows.store.delete_workflow(row.id)
        return f"Deleted {row.name} (its past runs stay listed until they age out)."
    await workflows.store.set_paused(row.id, verb == "pause")
    return f"{row.name} is {'paused' if verb == 'pause' else 'running again'}."


async def _show(workflows: Workflows, row: WorkflowRow) -> str:
    steps = row.definition.get("steps", [])
    lines = [
        f"{row.name} ({'yours' if row.source == USER_SOURCE else 'from ' + row.source}):"
        f" {_trigger(row)}",
        *(f"  {i + 1}. {_step_line(s)}" for i, s in enumerate(steps)),
    ]
    for run in await workflows.store.runs(workflow_id=row.id, limit=3):
        lines.append(await _show_run(workflows, run))
    return "\n".join(lines)


async def _show_run(workflows: Workflows, run: RunRow) -> str:
    steps = await workflows.store.steps(run.id)
    done = ", ".join(f"{s}: {r.status}" for s, r in steps.items()) or "no step yet"
    when = datetime.fromtimestamp(run.created_at).strftime("%Y-%m-%d %H:%M")
    return f"run {run.id} ({run.trigger}, {when}): {run.status}{_outcome(run)} [{done}]"


def _step_line(step: dict[str, Any]) -> str:
    for action in ("tool", "agent", "ask", "wait", "until", "notify"):
        if action in step:
            return f"{step['id']}: {action} {step[action]}"
    return f"{step['id']}: in parallel: " + ", ".join(_step_line(s) for s in step["parallel"])


def _trigger(row: WorkflowRow) -> str:
    trigger = row.definition.get("trigger") or {}
    if row.paused:
        return "paused"
    if row.next_at is not None:
        when = datetime.fromtimestamp(row.next_at).strftime("%Y-%m-%d %H:%M")
        return f"cron {trigger.get('cron')}, next {when}"
    if trigger.get("event"):
        return f"on event {trigger['event']}"
    return "on /run"


def _last(runs: list[RunRow]) -> str:
    return "never" if not runs else f"{runs[0].status}{_outcome(runs[0])}"


def _outcome(run: RunRow) -> str:
    if run.error:
        return f" — {run.error}"
    if run.result:
        return f" — {run.result[:120]}"
    return ""


def workflow_tools(workflows: Workflows) -> list[FunctionTool]:
    """``run_workflow``, ``save_workflow`` (side effects: asked under ``safe``) and
    ``list_workflows``, for the turn's person."""

    async def run_workflow(ctx: RunContextWrapper[Any], name: str, input: str = "") -> str:
        """Start one of the user's saved workflows now (see list_workflows).

        Args:
            name: The workflow's name.
            input: Text the workflow's steps can use as {{input}}.
        """
        run = await workflows.start(_turn(ctx), name, input)
        return f"started run {run.id} of {name}"

    async def save_workflow(ctx: RunContextWrapper[Any], workflow_json: str) -> str:
        """Save a routine of several steps for the user, e.g. "every day at 9 send me ...".

        Args:
            workflow_json: JSON {"name": "morning", "description": "...", "trigger":
                {"cron": "0 9 * * *"}, "steps": [{"id": "s1", "agent": "prompt"},
                {"id": "s2", "notify": "{{s1}}"}]}. A step has an id and one of tool
                (+ args), agent (a prompt), ask, wait ("10m"), until ("07:30"), notify
                or parallel; {{ID}} is an earlier step's result. Omit the trigger for
                a workflow the user starts with /run.
        """
        try:
            data = json.loads(workflow_json)
        except ValueError as exc:
            raise WorkflowError(f"workflow_json is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise WorkflowError("workflow_json must be a JSON object")
        row = await workflows.save_user_workflow(_turn(ctx), data)
        return f"saved {row.name}: {_trigger(row)}"

    async def list_workflows(ctx: RunContextWrapper[Any]) -> str:
        """List the user's workflows and background tasks with their last results."""
        return await listing(workflows, _turn(ctx))

    return [
        # a run's steps are each consented on their own: starting one changes nothing
        side_effects(function_tool(run_workflow, failure_error_function=tool_error_message), False),
        side_effects(function_tool(save_workflow, failure_error_function=tool_error_message), True),
        side_effects(
            function_tool(list_workflows, failure_error_function=tool_error_message), False
        ),
    ]


def _turn(ctx: RunContextWrapper[Any]) -> TurnContext:
    context = getattr(ctx, "context", None)
    return context if isinstance(context, TurnContext) else TurnContext(turn_id=str(time.time()))
