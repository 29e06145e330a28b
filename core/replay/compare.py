"""Comparing two frame streams: the recorded one and the one a replay produced.

Volatile fields are normalised before comparing: ids that name this run
(``turn_id``, ``session_id``, ``approval_id``, a question's ``request_id``), times and durations
(``timestamp``, ``created``, ``*_at``, ``*_ms``), and clock readings in a
model request's instructions (the orchestrator's prompt holds the date and
time; a time anywhere else, say in a tool's arguments, is compared). Whether
a tool ran or was stood in for (``stood_in``) and whether a response was
streamed (``streamed``, the stream's ``events``: the channel's way of showing
it) are not compared either; records made inside a tool call the replay
stood in for (an agent as a tool calling its model) have no counterpart in
the replay and are left out of the expected stream.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.events.topics import RecordTopics
from core.replay.trace import Frame

__all__ = ["Divergence", "aligned", "first_divergence", "normalised"]

VOLATILE_KEYS = frozenset(
    {
        *("turn_id", "session_id", "approval_id", "request_id", "response_id"),  # ids of one run
        *("timestamp", "created"),  # when (as do keys ending in _at; _ms: how long)
        *("stood_in", "streamed", "events"),  # how the replay answered, not what
    }
)
_CLOCK = re.compile(
    r"\d{4}-\d{2}-\d{2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?|\b\d{1,2}:\d{2}(:\d{2})?\b"
    r"|\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b"
)
# the time a turn ran at: in the instructions of agents that put it there, and in the
# orchestrator's turn note (a system message after the history, ADR 0054)
CLOCK_KEYS = frozenset({"instructions"})
CLOCK_ROLES = frozenset({"system"})
DIFF_LINES = 24


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the replay first differs: turn (1-based; a workflow run's step, ``step``
    its id), frame index (0-based) in that turn, what was recorded and what the
    replay produced (``None``: no frame)."""

    turn: int
    frame: int
    expected: dict[str, Any] | None
    got: dict[str, Any] | None
    diff: str
    step: str | None = None

    def as_dict(self) -> dict[str, Any]:
        where: dict[str, Any] = {"turn": self.turn}
        if self.step is not None:
            where = {"step": self.turn, "step_id": self.step}
        return {
            **where,
            "frame": self.frame,
            "expected": self.expected,
            "got": self.got,
            "diff": self.diff,
        }


def normalised(frame: Frame) -> dict[str, Any]:
    """The frame as compared: topic and payload without volatile fields."""
    return {"topic": frame.topic, "payload": _clean(frame.payload)}


def _clean(value: Any, clock: bool = False) -> Any:
    """``value`` without volatile keys; with ``clock``, date and time readings in
    its text replaced (only instructions and system messages hold the time the turn
    ran at)."""
    if isinstance(value, dict):
        clock = clock or value.get("role") in CLOCK_ROLES
        return {
            k: _clean(v, clock or k in CLOCK_KEYS)
            for k, v in value.items()
            if k not in VOLATILE_KEYS and not k.endswith(("_at", "_ms"))
        }
    if isinstance(value, list):
        return [_clean(v, clock) for v in value]
    if isinstance(value, str) and clock:
        return _CLOCK.sub("<clock>", value)
    return value


def comparable(expected: Sequence[Frame], got: Sequence[Frame]) -> list[Frame]:
    """``expected`` without the records made inside tool calls the replay stood in for."""
    skipped = {
        f.payload.get("call_id")
        for f in got
        if f.topic == RecordTopics.REPLAY_TOOL and f.payload.get("stood_in")
    }
    return [f for f in expected if f.payload.get("inside") is None or _outside(f, skipped)]


def _outside(frame: Frame, skipped: set[Any]) -> bool:
    return frame.payload.get("inside") not in skipped


def first_divergence(
    turn: int, expected: Sequence[Frame], got: Sequence[Frame]
) -> Divergence | None:
    """The first frame of turn ``turn`` where ``got`` differs from ``expected``."""
    wanted = [normalised(f) for f in comparable(expected, got)]
    produced = [normalised(f) for f in got]
    for index in range(max(len(wanted), len(produced))):
        want = wanted[index] if index < len(wanted) else None
        have = produced[index] if index < len(produced) else None
        if want is not None and have is not None:
            want = aligned(want, have)
        if want != have:
            return Divergence(turn, index, want, have, short_diff(want, have))
    return None


def aligned(want: dict[str, Any], have: dict[str, Any]) -> dict[str, Any]:
    """A model request recorded before ADR 0052 (its whole input) as ``have`` records
    it: the ``history`` items ``have`` counts left out of ``input``."""
    request, theirs = want["payload"].get("request"), have["payload"].get("request")
    if not isinstance(request, dict) or not isinstance(theirs, dict):
        return want
    given = theirs.get("history")
    items = request.get("input")
    if "history" in request or not isinstance(given, int) or not isinstance(items, list):
        return want
    if len(items) < given:
        return want
    request = {**request, "history": given, "input": items[given:]}
    return {**want, "payload": {**want["payload"], "request": request}}


def short_diff(expected: Any, got: Any) -> str:
    """A unified diff of the two frames' JSON, at most ``DIFF_LINES`` lines."""
    left = json.dumps(expected, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    right = json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
    lines = list(difflib.unified_diff(left, right, "recorded", "replayed", n=1, lineterm=""))
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... ({len(lines) - DIFF_LINES} more lines)"]
    return "\n".join(lines)
