"""Replay (ADR 0033, docs/replay.md): record every turn, re-run a conversation, compare.

The door is lazy (PEP 562), as ``core.metrics``: the kernel imports the
recorder from here while the replay driver imports the kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime import lazy_door

if TYPE_CHECKING:
    from core.replay.compare import Divergence, first_divergence
    from core.replay.driver import ReplayReport, replay_trace
    from core.replay.errors import PurgedError, ReplayError
    from core.replay.recording import RecordingModel, ReplayRecorder
    from core.replay.trace import Trace, list_sessions, load_session, read_trace, write_trace

__all__ = [
    "Divergence",
    "PurgedError",
    "RecordingModel",
    "ReplayError",
    "ReplayRecorder",
    "ReplayReport",
    "Trace",
    "first_divergence",
    "list_sessions",
    "load_session",
    "read_trace",
    "replay_trace",
    "write_trace",
]

_HOMES = {
    "Divergence": "compare",
    "first_divergence": "compare",
    "ReplayReport": "driver",
    "replay_trace": "driver",
    "PurgedError": "errors",
    "ReplayError": "errors",
    "RecordingModel": "recording",
    "ReplayRecorder": "recording",
    "Trace": "trace",
    "list_sessions": "trace",
    "load_session": "trace",
    "read_trace": "trace",
    "write_trace": "trace",
}

__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
