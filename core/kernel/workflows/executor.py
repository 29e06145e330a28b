"""The durable executor: each run goes step by step, each step recorded (ADR 0091).

The model is DBOS's: a run is a function of steps, each step's outcome is
checkpointed in the database before the next begins, and recovery is running
the run again — a step found done is not done again, its recorded result is
read instead. Waits and retries are durable too: the run is parked with a wake
time, so a restart (or another process) picks it up when it is due. A step
interrupted by a crash while it acted is done again (at least once, as in
DBOS and Temporal); a tool step runs under a ``turn_id`` of its own, so the
kernel's tool-run journal (ADR 0061) answers its rerun with the recorded output
when the tool had finished. A notify step's message is keyed by run and step,
so it is sent once.

Only the leading process drives runs (``Leadership``, ADR 0036); with SQLite
that is the one kernel.

Each run is recorded for replay as the session ``workflow:RUN`` (``Recording``,
the replay recorder): its start, then each step's outcome with the model and
tool calls it made — a step acts while its turn is served, so the recorder's
model and tool wrappers see it. A replay drives the run again with
``timeless`` set: waits end at once (ADR 0091).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from core.config import WorkflowsSettings
from core.extensions.access.state_scope import serving
from core.extensions.contract import TurnContext
from core.extensions.loading.workflow_section import (
    TEMPLATE,
    Step,
    WorkflowDefinition,
    parse_duration,
)
from core.extensions.sdk import resolve_zone
from core.kernel.workflows.store import RunRow, StepRow, WorkflowStore
from core.runtime.errors import HearthError

__all__ = [
    "NO_RECORDING",
    "Executor",
    "Powers",
    "Recording",
    "StepFailedError",
    "render",
    "run_session",
    "run_turn",
]

log = logging.getLogger("core.kernel.workflows")

Pause = Literal["pause"]
PAUSE: Pause = "pause"


class StepFailedError(HearthError):
    """A step could not do its work; the message says why (the run's error names it)."""


class Powers(Protocol):
    """What a step may use of the kernel (``service.KernelPowers`` gives the real ones)."""

    async def call_tool(self, turn: TurnContext, name: str, args: dict[str, Any]) -> str: ...

    async def run_agent(self, turn: TurnContext, prompt: str) -> str: ...

    async def ask(
        self, turn: TurnContext, prompt: str, kind: str, options: list[str], timeout_s: float
    ) -> str | None: ...

    async def notify(self, turn: TurnContext, text: str, key: str) -> None: ...

    def leading(self) -> bool: ...

    def observe(self, event: str, workflow: str, seconds: float | None = None) -> None: ...


class Recording(Protocol):
    """Who records runs for replay (the replay recorder, ``core.replay``)."""

    async def run_started(self, session_id: str, head: dict[str, Any]) -> None: ...

    def step_started(self, turn: TurnContext) -> None: ...

    async def step_ended(self, turn: TurnContext, step: dict[str, Any]) -> None: ...


class _NoRecording:
    async def run_started(self, session_id: str, head: dict[str, Any]) -> None:
        return None

    def step_started(self, turn: TurnContext) -> None:
        return None

    async def step_ended(self, turn: TurnContext, step: dict[str, Any]) -> None:
        return None


NO_RECORDING: Recording = _NoRecording()


@dataclass
class _Run:
    row: RunRow
    definition: WorkflowDefinition
    steps: dict[str, StepRow]
    results: dict[str, str]


class Executor:
    """Drives live runs: ``wake`` after a run is added here, ``run`` polls for the rest."""

    def __init__(
        self,
        store: WorkflowStore,
        powers: Powers,
        settings: WorkflowsSettings,
        *,
        timezone: str = "local",
        ticks: Callable[[], Awaitable[None]] | None = None,
        recording: Recording = NO_RECORDING,
    ) -> None:
        self.store = store
        self.powers = powers
        self.settings = settings
        self.recording = recording
        self.timeless = False  # a replay's: a wait ends at once
        self.zone = resolve_zone(timezone)
        self._ticks = ticks  # the cron timer's turn, on the same loop
        self._wake = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """While this process leads: fire due timers, start runs that are due; wait for
        a wake or ``workflows.poll_s``."""
        try:
            while True:
                if self.powers.leading():
                    await self.tick()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.settings.poll_s):
                        await self._wake.wait()
                self._wake.clear()
        finally:
            await self.stop()

    async def tick(self) -> None:
        if self._ticks is not None:
            await self._ticks()
        for run in await self.store.runnable(time.time()):
            if run.id not in self._tasks:
                task = asyncio.create_task(self._drive(run), name=f"workflow-run-{run.id}")
                self._tasks[run.id] = task
                task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        for run_id, running in list(self._tasks.items()):
            if running is task:
                del self._tasks[run_id]

    async def stop(self) -> None:
        """Stop driving (a run stays where its record says, for the next process)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def cancel(self, run_id: str) -> None:
        """Stop a run driven here (its row says ``cancelled`` already)."""
        task = self._tasks.get(run_id)
        if task is not None:
            task.cancel()

    # ------------------------------------------------------------ one run

    async def _drive(self, row: RunRow) -> None:
        try:
            await self._go(row)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must end the run with a reason, not loop on it
            log.exception("workflow run %s failed", row.id)
            await self._end(row, "failed", error=f"internal error: {exc}")

    async def _go(self, row: RunRow) -> None:
        definition = WorkflowDefinition.model_validate(row.definition)
        if row.status == "pending":
            self.powers.observe("started", definition.name)
            await self.recording.run_started(run_session(row), _head(row))
        await self.store.set_run(row.id, "running")
        steps = await self.store.steps(row.id)
        results = {s: r.result or "" for s, r in steps.items() if r.status in ("done", "skipped")}
        run = _Run(row, definition, steps, results)
        last = ""
        for step in definition.steps:
            current = await self.store.run(row.id)
            if current is None or current.status == "cancelled":
                return
            outcome = await self._step(run, step)
            if outcome == PAUSE:
                return
            last = outcome
        await self._end(row, "succeeded", result=last)

    async def _end(
        self,
        row: RunRow,
        status: Literal["succeeded", "failed"],
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        if not await self.store.set_run(row.id, status, result=result, error=error):
            return  # cancelled meanwhile
        name = row.definition.get("name", row.workflow_id)
        self.powers.observe(status, name, time.time() - row.created_at)
        if status == "failed":
            text = f"Workflow {name} (run {row.id}) failed: {error}"
            await self.powers.notify(run_turn(row, "end"), text, f"workflow:{row.id}:failed")
        log.info("workflow run %s %s", row.id, status)

    async def _step(self, run: _Run, step: Step) -> str | Pause:
        recorded = run.steps.get(step.id)
        if recorded is not None and recorded.status in ("done", "skipped"):
            return recorded.result or ""
        if step.when is not None and not step.when.holds(run.results.get(step.when.step, "")):
            await self.store.step_ended(run.row.id, step.id, "skipped", result="")
            await self._recorded(run, step, "skipped", when=step.when.model_dump(exclude_none=True))
            run.results[step.id] = ""
            return ""
        if step.parallel is not None:
            outcomes = await asyncio.gather(*(self._step(run, m) for m in step.parallel))
            if PAUSE in outcomes:
                return PAUSE
            combined = json.dumps(dict(zip([m.id for m in step.parallel], outcomes, strict=True)))
            await self.store.step_ended(run.row.id, step.id, "done", result=combined)
            await self._recorded(run, step, "done", result=combined)
            run.results[step.id] = combined
            return combined
        if step.wait is not None or step.until is not None:
            return await self._wait(run, step, recorded)
        return await self._act(run, step)

    async def _wait(self, run: _Run, step: Step, recorded: StepRow | None) -> str | Pause:
        now = time.time()
        if recorded is not None and recorded.status == "waiting" and recorded.result:
            wake_at = float(recorded.result)
        else:
            wake_at = now if self.timeless else self._wake_time(step, now)
            await self.store.step_ended(run.row.id, step.id, "waiting", result=repr(wake_at))
        if wake_at > now:
            await self.store.set_run(run.row.id, "waiting", wake_at=wake_at)
            self._remind(wake_at - now)
            log.info("workflow run %s: step %s waits %.0f s", run.row.id, step.id, wake_at - now)
            return PAUSE
        await self.store.step_ended(run.row.id, step.id, "done", result="")
        await self._recorded(run, step, "done", result="", input=step.wait or step.until)
        run.results[step.id] = ""
        return ""

    def _wake_time(self, step: Step, now: float) -> float:
        if step.wait is not None:
            return now + parse_duration(step.wait)
        text = (step.until or "").strip()
        if ":" in text and len(text) <= 5:
            hours, minutes = (int(part) for part in text.split(":"))
            local = datetime.now(UTC).astimezone(self.zone)
            target = local.replace(hour=hours, minute=minutes, second=0, microsecond=0)
            if target.timestamp() <= now:
                target += timedelta(days=1)
            return target.timestamp()
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=self.zone)
        return moment.timestamp()

    def _remind(self, delay_s: float) -> None:
        """Wake the loop when a short wait ends (a long one is found by the poll)."""
        if delay_s < self.settings.poll_s:
            asyncio.get_running_loop().call_later(max(delay_s, 0.0), self._wake.set)

    async def _act(self, run: _Run, step: Step) -> str | Pause:
        attempt = await self.store.step_started(run.row.id, step.id)
        turn = run_turn(run.row, step.id)
        started, started_at = time.monotonic(), time.time()
        given = _given(run, step)
        self.recording.step_started(turn)
        try:
            with serving(turn):  # the step's model and tool calls are this turn's
                result = await self._perform(run, step, turn, given)
        except Exception as exc:
            reason = str(exc)
            if not isinstance(exc, StepFailedError):
                reason = f"{type(exc).__name__}: {exc}"
                log.warning("workflow run %s step %s: %s", run.row.id, step.id, exc)
            outcome = "failed" if step.ask is not None or attempt > self._retries(step) else "retry"
            await self._recorded(
                run, step, outcome, turn, input=given, error=reason, started_at=started_at
            )
            return await self._failed(run, step, attempt, reason)
        self.powers.observe("step", run.definition.name, time.monotonic() - started)
        await self.store.step_ended(run.row.id, step.id, "done", result=result)
        await self._recorded(
            run, step, "done", turn, input=given, result=result, started_at=started_at
        )
        run.results[step.id] = result
        return result

    async def _recorded(
        self,
        run: _Run,
        step: Step,
        status: str,
        turn: TurnContext | None = None,
        **outcome: Any,
    ) -> None:
        """The step's outcome told to the recorder (with the calls it made as ``turn``)."""
        record = {"step": step.id, "action": step.action, "status": status, **outcome}
        await self.recording.step_ended(turn or run_turn(run.row, step.id), record)

    async def _perform(self, run: _Run, step: Step, turn: TurnContext, given: Any) -> str:
        if step.tool is not None:
            return await self.powers.call_tool(turn, step.tool, given)
        if step.agent is not None:
            return await self.powers.run_agent(turn, given)
        if step.notify is not None:
            key = f"workflow:{run.row.id}:{step.id}"
            await self.powers.notify(turn, given, key)
            return ""
        assert step.ask is not None
        await self.store.set_run(run.row.id, "asking")
        kind = "input" if step.input else "select" if step.options else "confirm"
        prompt = f"{run.definition.name}: {given}"
        answer = await self.powers.ask(
            turn, prompt, kind, step.options, self.settings.ask_timeout_s
        )
        if answer is None:
            raise StepFailedError("the question was not answered in time")
        await self.store.set_run(run.row.id, "running")
        return answer

    def _retries(self, step: Step) -> int:
        return self.settings.step_retries if step.retries is None else step.retries

    async def _failed(self, run: _Run, step: Step, attempt: int, reason: str) -> str | Pause:
        if step.ask is None and attempt <= self._retries(step):
            delay = self.settings.retry_delay_s * 2 ** (attempt - 1)
            await self.store.step_ended(run.row.id, step.id, "retry", error=reason)
            await self.store.set_run(run.row.id, "waiting", wake_at=time.time() + delay)
            self._remind(delay)
            log.info(
                "workflow run %s step %s: retry in %g s (%s)", run.row.id, step.id, delay, reason
            )
            return PAUSE
        await self.store.step_ended(run.row.id, step.id, "failed", error=reason)
        await self._end(run.row, "failed", error=f"step {step.id}: {reason}")
        return PAUSE


def run_turn(row: RunRow, step_id: str) -> TurnContext:
    """Whose a run's step is: its person, speaking where the run speaks, under a turn
    id of its own (the tool-run journal's key, ADR 0061)."""
    member = bool(row.person)
    return TurnContext(
        agent_id="workflow",
        channel_id=row.channel_id,
        user_id=row.user_id,
        session_id=run_session(row),  # the run's replay session, also where it speaks
        turn_id=f"{run_session(row)}:{step_id}",
        person=row.person or None,
        role="member" if member else "owner",
    )


def run_session(row: RunRow) -> str:
    """The run's session: its steps' turns and its replay records (``workflow:RUN``)."""
    return f"workflow:{row.id}"


def _head(row: RunRow) -> dict[str, Any]:
    """What a replay starts the run again from (``replay.run``)."""
    return {
        "run_id": row.id,
        "workflow_id": row.workflow_id,
        "person": row.person,
        "trigger": row.trigger,
        "input": row.input,
        "definition": row.definition,
        "channel_id": row.channel_id,
        "user_id": row.user_id,
    }


def _given(run: _Run, step: Step) -> Any:
    """What the step acts on, its templates filled: a tool's arguments, an agent's
    prompt, a question, a notice."""
    if step.tool is not None:
        return {k: render(v, run) if isinstance(v, str) else v for k, v in step.args.items()}
    return render(step.agent or step.notify or step.ask or "", run)


def render(text: str, run: _Run) -> str:
    """``{{STEP}}`` replaced by that step's result, ``{{input}}`` by the run's input."""

    def value(match: Any) -> str:
        name = match.group(1)
        return run.row.input if name == "input" else run.results.get(name, "")

    return TEMPLATE.sub(value, text)
