"""Comparing frame streams (ADR 0033): what changes by nature between two runs
(ids, times, clock readings in text, streamed or not) is not a divergence;
anything else is, at the first differing frame; records made inside a tool
call the replay answered from the recording are not expected again."""

from __future__ import annotations

from core.replay.compare import first_divergence
from core.replay.trace import Frame


def model(turn_id: str, instructions: str, **extra) -> Frame:
    request = {"instructions": instructions, "input": [{"role": "user", "content": "hi"}]}
    return Frame("replay.model", {"turn_id": turn_id, "request": request, "inside": None, **extra})


def test_ids_times_clock_and_streaming_are_not_divergences():
    recorded = [
        model("1@5.0", "Now: 2026-11-24 21:41 (Tuesday)", streamed=False, response_id="r1"),
        Frame("postprocess.completed", {"turn_id": "1@5.0", "execution_time_ms": 3.2, "ok": 1}),
        Frame("hook.approval", {"approval_id": "abcd", "decision": "approved", "created_at": 1}),
    ]
    replayed = [
        model("9@7.5", "Now: 2026-12-01 08:05 (Monday)", streamed=True, response_id="r9"),
        Frame("postprocess.completed", {"turn_id": "9@7.5", "execution_time_ms": 0.4, "ok": 1}),
        Frame("hook.approval", {"approval_id": "wxyz", "decision": "approved", "created_at": 2}),
    ]
    assert first_divergence(1, recorded, replayed) is None


def test_a_time_outside_the_instructions_is_compared():
    recorded = [Frame("hook.tool_call", {"after": {"when": "18:30"}})]
    replayed = [Frame("hook.tool_call", {"after": {"when": "19:30"}})]
    assert first_divergence(1, recorded, replayed) is not None


def test_the_first_differing_frame_is_reported_with_a_diff():
    recorded = [model("t", "be brief"), Frame("hook.output", {"after": "HELLO"})]
    replayed = [model("t", "be brief"), Frame("hook.output", {"after": "hello"})]
    divergence = first_divergence(3, recorded, replayed)
    assert divergence is not None
    assert (divergence.turn, divergence.frame) == (3, 1)
    assert '-  "after": "HELLO"' in divergence.diff and '+  "after": "hello"' in divergence.diff


def test_a_missing_or_extra_frame_is_a_divergence():
    frames = [model("t", "be brief"), Frame("hook.output", {"after": "x"})]
    missing = first_divergence(1, frames, frames[:1])
    assert missing is not None and missing.frame == 1 and missing.got is None
    extra = first_divergence(1, frames[:1], frames)
    assert extra is not None and extra.expected is None


def test_records_inside_a_stood_in_tool_are_not_expected():
    inner = model("t", "the agent's own model", inside="call-7")
    tool = Frame("replay.tool", {"tool": "planner", "call_id": "call-7", "stood_in": False})
    replayed_tool = Frame("replay.tool", {"tool": "planner", "call_id": "call-7", "stood_in": True})
    assert first_divergence(1, [inner, tool], [replayed_tool]) is None
    ran_again = first_divergence(1, [inner, tool], [tool])  # it ran: its model call is missing
    assert ran_again is not None and ran_again.frame == 0


def model_frame(turn_id: str, request: dict) -> Frame:
    return Frame("replay.model", {"turn_id": turn_id, "request": request, "inside": None})


def test_a_recording_of_whole_inputs_compares_with_a_replay_that_counts_the_history():
    """Recordings made before ADR 0052 hold a request's whole input; a replay now
    records how many history items it starts with and the rest."""
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    asked = {"role": "user", "content": "launch"}
    old = model_frame("t1", {"instructions": "x", "input": [*history, asked], "tools": []})
    new = model_frame("r1", {"instructions": "x", "history": 2, "input": [asked], "tools": []})
    assert first_divergence(1, [old], [new]) is None
    other = model_frame(
        "r1", {"instructions": "x", "history": 2, "input": [history[0]], "tools": []}
    )
    assert first_divergence(1, [old], [other]) is not None
