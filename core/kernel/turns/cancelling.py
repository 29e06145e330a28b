"""Turns the user can stop: Ctrl-C in the terminal cancels the turn being answered.

A channel asks with ``system.turn.cancel`` (``TurnCancel``: its own channel id
and the user's id, published with the ``user_messages`` permission). The
router runs each model turn through ``RunningTurns.run`` keyed by the
conversation; ``cancel`` stops that task (the SDK's streamed run is cancelled
with it, ``stream_run``). The turn ends with status ``cancelled`` and the reply
``CANCELLED_REPLY``: recorded in the ledger without history items, so the
conversation's history stays as it was before the message, and the kernel
journals ``turn.cancelled`` (``SystemTopics.TURN_CANCELLED``). Shutting the
kernel down still cancels the caller as before: that cancellation is passed
on, not turned into a reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["CANCELLED_REPLY", "RunningTurns"]

T = TypeVar("T")

CANCELLED_REPLY = "(cancelled)"


class RunningTurns:
    """The model turns being answered, one per conversation key."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Future[object]] = {}

    async def run(self, key: str, work: Awaitable[T]) -> T | None:
        """``work``'s result, or ``None`` when ``cancel(key)`` stopped it."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        self._tasks[key] = task  # type: ignore[assignment]
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if (current is not None and current.cancelling()) or not task.cancelled():
                raise  # the kernel is stopping us, not the user
            return None
        finally:
            if self._tasks.get(key) is task:
                del self._tasks[key]

    def cancel(self, key: str) -> bool:
        """Stop the turn running for ``key``; ``False`` when there is none."""
        task = self._tasks.get(key)
        if task is None or task.done():
            return False
        task.cancel()
        return True
