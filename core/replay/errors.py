"""What stops a replay before it can compare anything."""

from __future__ import annotations

__all__ = ["PurgedError", "ReplayError"]


class ReplayError(Exception):
    """The conversation or trace cannot be replayed; the message says why."""


class PurgedError(ReplayError):
    """Records the conversation needs were purged (``events.retention_days``)."""
