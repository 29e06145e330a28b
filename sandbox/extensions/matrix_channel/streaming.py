"""Showing a reply while it is generated: one Matrix message, edited at a bounded rate.

The rule (first shown after ``interval_s``, edits at most once per
``interval_s``, best-effort previews, the final text split past the limit) is
the extension library's ``EditedStream``; this gives it the client-server
calls: an edit is an ``m.replace`` event, ``M_LIMIT_EXCEEDED`` postpones the
next preview by its ``retry_after_ms``. The typing notice is shown at the
start, refreshed while tools run and withdrawn with the final text.
"""

from __future__ import annotations

import logging

from core.extensions.sdk import EditedStream

from .rooms import Rooms
from .sender import MAX_BODY_CHARS, MatrixSendError, Sender

TYPING_REFRESH_S = 4.0
TYPING_TIMEOUT_MS = 10_000


class StreamPresenter(EditedStream[str, str]):
    """Streams into a room (by id), editing a message (by event id)."""

    target_errors = (ValueError, TimeoutError)
    typing_refresh_s = TYPING_REFRESH_S

    def __init__(
        self, sender: Sender, rooms: Rooms, logger: logging.Logger, *, interval_s: float
    ) -> None:
        super().__init__(logger, limit=MAX_BODY_CHARS, interval_s=interval_s)
        self._sender = sender
        self._rooms = rooms

    async def target(self, address: str) -> str:
        return await self._rooms.target(address)

    async def send(self, where: str, text: str, *, preview: bool) -> str:
        return await self._sender.send_piece(where, text, attempts=1 if preview else None)

    async def edit(self, where: str, message: str, text: str, *, preview: bool) -> None:
        await self._sender.edit_piece(where, message, text, attempts=1 if preview else None)

    def retry_after(self, exc: Exception) -> float | None:
        return exc.retry_after_s if isinstance(exc, MatrixSendError) else None

    async def typing(self, where: str, on: bool) -> None:
        await self._sender.client.room_typing(where, on, timeout=TYPING_TIMEOUT_MS)
