"""A workflow run's trace (ADR 0091): steps in the order first recorded, each with the
hook frames of its recorded attempts, its calls and its outcome; the frames of an
attempt a crash cut short (journaled before the next attempt started) are left out."""

from __future__ import annotations

import pytest

from core.replay.errors import ReplayError
from core.replay.runs import build_any, build_run_trace, is_run

SESSION = "workflow:morning@1"


def event(topic: str, correlation: str, payload: dict, at: float) -> dict:
    return {"topic": topic, "correlation_id": correlation, "payload": payload, "created_at": at}


def step(step_id: str, started_at: float, at: float, status: str = "done") -> dict:
    return event(
        "replay.step",
        f"{SESSION}:{step_id}",
        {
            "step": step_id,
            "action": "tool",
            "status": status,
            "started_at": started_at,
            "calls": [{"topic": "replay.tool", "tool": "record", "call_id": step_id}],
        },
        at,
    )


def asked(step_id: str, at: float) -> dict:
    return event("hook.ui", f"{SESSION}:{step_id}", {"decision": "asked"}, at)


START = event(
    "replay.run",
    SESSION,
    {"session_id": SESSION, "run_id": "morning@1", "workflow_id": "morning", "channel_id": "c"},
    1.0,
)


def test_steps_hold_their_attempts_frames_calls_and_outcomes() -> None:
    raw = [
        START,
        asked("first", 2.0),  # an attempt a crash cut short: no record of it
        asked("first", 5.0),
        step("first", 4.0, 6.0, "retry"),
        asked("first", 7.5),
        step("first", 7.0, 8.0),
        step("second", 9.0, 10.0),
    ]
    trace = build_run_trace(SESSION, raw)
    assert trace.run is not None and trace.run["workflow_id"] == "morning"
    assert [s.text for s in trace.turns] == ["first", "second"]
    first = [(f.topic, f.payload.get("status")) for f in trace.turns[0].frames]
    assert first == [
        ("hook.ui", None),
        ("replay.tool", None),
        ("replay.step", "retry"),
        ("hook.ui", None),
        ("replay.tool", None),
        ("replay.step", "done"),
    ]
    assert trace.turns[0].frames[1].payload["session_id"] == SESSION
    assert build_any(SESSION, raw).run is not None


def test_a_run_without_its_start_cannot_be_replayed() -> None:
    with pytest.raises(ReplayError, match="no recorded start"):
        build_run_trace(SESSION, [step("first", 1.0, 2.0)])
    assert is_run(SESSION) and not is_run("capture:u1")
