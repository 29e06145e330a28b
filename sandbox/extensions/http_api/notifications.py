"""Proactive messages for API users: stored, then offered to readers and live streams."""

from __future__ import annotations

import asyncio
import logging

from .store import ApiStore, Notification

PRUNE_EVERY = 100


class Notifications:
    """``add`` stores a message and wakes every waiting stream (``wait_after``)."""

    def __init__(self, store: ApiStore, keep: int, logger: logging.Logger) -> None:
        self._store = store
        self._keep = keep
        self._log = logger
        self._added_event = asyncio.Event()  # replaced after each add: waiters hold the old one
        self._added = 0
        self.closed = False

    def close(self) -> None:
        """End every live stream (the channel is stopping)."""
        self.closed = True
        self._wake()

    def reopen(self) -> None:
        self.closed = False

    def _wake(self) -> None:
        event, self._added_event = self._added_event, asyncio.Event()
        event.set()

    async def add(self, conversation: str | None, text: str) -> Notification:
        note = await self._store.add_notification(conversation, text)
        self._log.info(
            "kept notification %d for %s (%d chars)", note.id, conversation or "everyone", len(text)
        )
        self._added += 1
        if self._added % PRUNE_EVERY == 0:
            await self._store.prune(self._keep)
        self._wake()
        return note

    async def after(
        self, after: int, conversation: str | None, limit: int = 100
    ) -> list[Notification]:
        return await self._store.notifications(after, conversation, limit)

    async def wait_after(
        self, after: int, conversation: str | None, timeout_s: float
    ) -> list[Notification]:
        """The notifications after ``after``; waits up to ``timeout_s`` for one to come."""
        added = self._added_event  # taken before the read: an add in between sets it
        found = await self.after(after, conversation)
        if found:
            return found
        try:
            async with asyncio.timeout(timeout_s):
                await added.wait()
        except TimeoutError:
            return []
        return await self.after(after, conversation)
