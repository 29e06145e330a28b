"""A workflow run as replay reads it (ADR 0091): its ``replay.run`` and ``replay.step``
records, from the journal or a trace file.

A run is recorded as the session ``workflow:RUN``. Its trace is a ``Trace`` whose
``run`` is the run's start (definition, input, person, channel) and whose
"turns" are its steps, one per step in the order each was first recorded
(``turn_id`` the step's turn id, ``text`` the step's id). A step's frames are,
attempt after attempt: the hook frames journaled while it acted (an approval,
a question, a tool hook), the calls it made (``replay.model`` /
``replay.tool``) and a ``replay.step`` frame with its outcome (action, input,
status, result or error). Hook frames journaled before an attempt started
belong to an attempt a crash cut short (it left no record) and are left out.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from core.events.topics import PostProcessTopics, RecordTopics
from core.replay.errors import ReplayError
from core.replay.trace import (
    Frame,
    RecordedTurn,
    SessionSummary,
    Trace,
    build_trace,
    call_frames,
    events_with_blobs,
    read_events,
    resolve,
)

__all__ = [
    "RUN_PREFIX",
    "build_any",
    "build_run_trace",
    "is_run",
    "list_runs",
    "load_run",
    "run_events",
]

RUN_PREFIX = "workflow:"  # a run's session id: workflow:RUN_ID
STEP_FRAMES = (RecordTopics.HOOK_PREFIX, PostProcessTopics.PREFIX)


def is_run(session_id: str) -> bool:
    return session_id.startswith(RUN_PREFIX)


def run_events(journal: Path, session_id: str) -> list[dict[str, Any]]:
    """The run's start, its steps' frames and records, and the blobs they use."""
    prefix = session_id + ":"  # its steps' turn ids (a LIKE would read _ and % in a run id)
    return events_with_blobs(
        journal,
        "correlation_id = ? OR substr(correlation_id, 1, ?) = ?",
        [session_id, len(prefix), prefix],
    )


async def load_run(journal: Path, session_id: str) -> Trace:
    """The recorded run ``session_id`` (``workflow:RUN``)."""
    raw = await asyncio.to_thread(run_events, journal, session_id)
    return build_run_trace(session_id, raw)


def build_any(session_id: str, raw: list[dict[str, Any]]) -> Trace:
    """A run's trace when the events hold a run's start, else a conversation's."""
    if any(e["topic"] == RecordTopics.REPLAY_RUN for e in raw):
        return build_run_trace(session_id, raw)
    return build_trace(session_id, raw)


def build_run_trace(session_id: str, raw: list[dict[str, Any]]) -> Trace:
    """The run's start and its steps' frames (module docstring), from its events."""
    blobs = {
        e["payload"]["sha256"]: e["payload"]["json"]
        for e in raw
        if e["topic"] == RecordTopics.REPLAY_BLOB
    }
    start = next((e for e in raw if e["topic"] == RecordTopics.REPLAY_RUN), None)
    if start is None:
        raise ReplayError(
            f"workflow run {session_id}: no recorded start (`main.py replay --list` shows "
            "what can be replayed; runs started before replay recorded them, or with "
            "replay.record false, have none)"
        )
    head = resolve(start["payload"], blobs, session_id)
    steps: dict[str, RecordedTurn] = {}
    pending: dict[str, list[tuple[float | None, Frame]]] = {}  # hook frames of an attempt
    for event in raw:
        topic, turn_id = event["topic"], event.get("correlation_id") or ""
        if turn_id == session_id:
            continue
        if topic == RecordTopics.REPLAY_STEP:
            record = resolve(event["payload"], blobs, session_id)
            step = steps.setdefault(
                turn_id,
                RecordedTurn(
                    turn_id,
                    head.get("channel_id") or "",
                    head.get("user_id") or "",
                    None,
                    str(record.get("step")),
                ),
            )
            began = record.get("started_at")
            for at, frame in pending.pop(turn_id, []):
                if began is None or at is None or at >= began:
                    step.frames.append(frame)
            step.frames.extend(call_frames(record.get("calls", []), turn_id, session_id))
            outcome = {k: v for k, v in record.items() if k != "calls"}
            step.frames.append(Frame(RecordTopics.REPLAY_STEP, outcome))
        elif topic.startswith(STEP_FRAMES):
            frame = Frame(topic, resolve(event["payload"], blobs, session_id))
            pending.setdefault(turn_id, []).append((event.get("created_at"), frame))
    return Trace(session_id, list(steps.values()), raw, run=head)


async def list_runs(journal: Path) -> list[SessionSummary]:
    """Every recorded workflow run, most recent first."""

    def read() -> list[SessionSummary]:
        rows = read_events(
            journal, "topic IN (?, ?)", [RecordTopics.REPLAY_RUN, RecordTopics.REPLAY_STEP]
        )
        starts = {
            str(r["payload"].get("session_id")): r
            for r in rows
            if r["topic"] == RecordTopics.REPLAY_RUN
        }
        steps: dict[str, set[str]] = {}
        last: dict[str, float] = {}
        for row in rows:
            session = str(row["payload"].get("session_id"))
            if row["topic"] == RecordTopics.REPLAY_STEP and session in starts:
                steps.setdefault(session, set()).add(str(row["payload"].get("step")))
                last[session] = row["created_at"]
        summaries = []
        for session, start in starts.items():
            p = start["payload"]
            said = f"workflow {p.get('workflow_id')} ({p.get('trigger')})"
            began = start["created_at"]
            summaries.append(
                SessionSummary(
                    session,
                    len(steps.get(session, ())),
                    began,
                    last.get(session, began),
                    said,
                    unit="steps",
                )
            )
        return sorted(summaries, key=lambda s: s.last_at, reverse=True)

    return await asyncio.to_thread(read)
