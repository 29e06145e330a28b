"""What stops a replay before it can compare anything."""

from __future__ import annotations

from core.runtime.errors import HearthError

__all__ = ["PurgedError", "ReplayError"]


class ReplayError(HearthError):
    """The conversation or trace cannot be replayed; the message says why."""


class PurgedError(ReplayError):
    """Records the conversation needs were purged (``events.retention_days``)."""
