"""Replaying a workflow run (ADR 0091): its steps re-run on a fresh kernel against the
recorded model answers, tool results and answers to its questions, compared step by
step.

``replay_run`` starts the run again in a replay kernel (``replay_kernel``, as a
conversation's replay) under the same run id, with the workflow's definition as
it is *now* — an extension's as its manifest says, a person's own routine as
kept in the state database — or, when the workflow is gone, the recorded one.
Every model call of an agent step is answered from that step's records; a
tool that must not run gets its recorded result; each question the run asks
(an ``ask`` step, an approval of a side-effecting step) gets the recorded
answer, or times out where the recording did. Waits end at once and retries
come at once. Once the run has ended, each recorded step is compared with the
replayed step of the same id (hook frames, calls, outcome); a step only the
replay did is a divergence too.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from core.cli.replay_driver import ReplayReport, replay_kernel
from core.config import Settings
from core.events.topics import RecordTopics
from core.kernel.consent import Responder
from core.kernel.runner import Kernel
from core.kernel.workflows import BACKGROUND, LIVE, RunRow, WorkflowStore
from core.replay.compare import Divergence, first_divergence, normalised, short_diff
from core.replay.errors import ReplayError
from core.replay.runs import build_run_trace, run_events
from core.replay.standins import RunReplayState
from core.replay.trace import RecordedTurn, Trace
from core.runtime import JOURNAL_FILE, STATE_FILE

__all__ = ["replay_run"]

UI_FRAME = RecordTopics.HOOK_PREFIX + "ui"


async def replay_run(trace: Trace, settings: Settings, *, timeout_s: float = 120.0) -> ReplayReport:
    """Replay the recorded run ``trace`` and report the first divergence."""
    head = trace.run
    if head is None:
        raise ReplayError(f"{trace.session_id}: not a workflow run")
    report = ReplayReport(trace.session_id, unit="steps")
    state = RunReplayState(trace.turns)
    async with replay_kernel(settings, trace, state) as kernel:
        kernel.workflows.executor.timeless = True  # waits end at once
        definition = await _definition(kernel, settings, head, report)
        now = time.time()
        row = RunRow(
            str(head["run_id"]),
            str(head["workflow_id"]),
            str(head.get("person") or ""),
            "pending",
            str(head.get("trigger") or "replay"),
            str(head.get("input") or ""),
            definition,
            head.get("channel_id"),
            head.get("user_id"),
            None,
            None,
            None,
            now,
            now,
        )
        await kernel.workflows.store.add_run(row)
        kernel.workflows.executor.wake()
        await _until_ended(kernel, row.id, trace.turns, timeout_s)
        raw = await asyncio.to_thread(run_events, kernel.data_dir / JOURNAL_FILE, trace.session_id)
    replayed = build_run_trace(trace.session_id, raw) if raw else None
    _compare(report, trace.turns, replayed.turns if replayed else [])
    return report


async def _definition(
    kernel: Kernel, settings: Settings, head: dict[str, Any], report: ReplayReport
) -> dict[str, Any]:
    """The workflow's definition as it is now: an extension's (synced into the replay
    kernel), else a person's as kept in the state database, else the recorded one
    (a background task's is its prompt: the recorded one)."""
    workflow_id = str(head["workflow_id"])
    if workflow_id == BACKGROUND:
        return dict(head["definition"])
    found = await kernel.workflows.store.workflow(workflow_id)
    if found is None:
        kept = WorkflowStore.at(settings.data_dir / STATE_FILE, settings.storage)
        try:
            found = await kept.workflow(workflow_id)
        finally:
            await kept.aclose()
    if found is None:
        report.notes.append(f"workflow {workflow_id} is gone: replayed as recorded")
        return dict(head["definition"])
    return found.definition


async def _until_ended(
    kernel: Kernel, run_id: str, steps: list[RecordedTurn], timeout_s: float
) -> None:
    """Answer the run's questions from the record until the run has ended."""
    answers = {
        step.turn_id: [
            f.payload
            for f in step.frames
            if f.topic == UI_FRAME and f.payload.get("decision") != "asked"
        ]
        for step in steps
    }
    answered: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        await _answer(kernel, answers, answered)
        run = await kernel.workflows.store.run(run_id)
        if run is not None and run.status not in LIVE:
            return
        if time.monotonic() > deadline:
            raise ReplayError(f"workflow run {run_id} did not end within {timeout_s:g} s")
        await asyncio.sleep(0.02)


async def _answer(
    kernel: Kernel, answers: dict[str, list[dict[str, Any]]], answered: set[str]
) -> None:
    """Each question asked gets the next recorded outcome of its step's questions."""
    asked = await kernel.bus.journal.recent_events(200, topic=UI_FRAME)
    ui = kernel.consent.ui
    for event in reversed(asked):
        p = event.payload
        request_id = str(p.get("request_id"))
        if p.get("decision") != "asked" or request_id in answered:
            continue
        answered.add(request_id)
        waiting = answers.get(event.correlation_id or "", [])
        outcome = waiting.pop(0) if waiting else None
        if outcome is None or outcome.get("decision") != "answered":
            ui.expire(request_id)  # timed out in the recording (or never answered there)
            continue
        responder = Responder(str(p.get("channel_id")), str(p.get("user_id")))
        await ui.answer(request_id, str(outcome.get("after")), responder)


def _compare(report: ReplayReport, recorded: list[RecordedTurn], got: list[RecordedTurn]) -> None:
    """Each recorded step against the replayed step of its id, in the recorded order;
    then a step only the replay did."""
    replayed = {step.turn_id: step for step in got}
    for number, step in enumerate(recorded, 1):
        mine = replayed.pop(step.turn_id, None)
        report.turns, report.frames = number, report.frames + len(step.frames)
        found = first_divergence(number, step.frames, mine.frames if mine else [])
        if found is not None:
            report.divergence = replace(found, step=step.text)
            return
    for extra in replayed.values():
        first = normalised(extra.frames[0]) if extra.frames else None
        report.divergence = Divergence(
            len(recorded) + 1, 0, None, first, short_diff(None, first), step=extra.text
        )
        return
