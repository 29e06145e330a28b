"""Replay (ADR 0033, docs/replay.md): record every turn, re-run a conversation, compare.

The package sits below the kernel, which builds the recorder; what re-runs a
conversation on a kernel is a command (``core.cli.replay_driver``, ADR 0081).
The door is lazy (PEP 562): ``main.py replay --list`` reads traces without
the agents SDK that the stand-ins import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.replay.compare import (
        Divergence as Divergence,
        first_divergence as first_divergence,
    )
    from core.replay.errors import (
        PurgedError as PurgedError,
        ReplayError as ReplayError,
    )
    from core.replay.recording import ReplayRecorder as ReplayRecorder
    from core.replay.recording_model import RecordingModel as RecordingModel
    from core.replay.trace import (
        Trace as Trace,
        list_sessions as list_sessions,
        load_session as load_session,
        read_trace as read_trace,
        write_trace as write_trace,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
