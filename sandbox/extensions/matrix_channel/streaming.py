"""Showing a reply while it is generated: one message, edited at a bounded rate.

As on Telegram (issue 41): text is first shown once the stream has run
``interval_s`` (a reply ready sooner is sent whole, once); later chunks edit
that message (``m.replace``) at most once per ``interval_s`` and only when the
text changed. Previews are best-effort (one attempt; ``M_LIMIT_EXCEEDED``
postpones the next one by its ``retry_after_ms``). The final text is retried
like any send, waits out the edit interval, and is split into more messages
when it is too long for one event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from core.extensions.sdk import split_text

from .rooms import Rooms
from .sender import MAX_BODY_CHARS, MatrixSendError, Sender

TYPING_REFRESH_S = 4.0
TYPING_TIMEOUT_MS = 10_000


@dataclass
class _Stream:
    room_id: str
    text: str = ""
    event_id: str | None = None
    shown: str | None = None
    last_edit: float = 0.0
    hold_until: float = 0.0
    last_typing: float = 0.0
    started: float = field(default_factory=time.monotonic)


class StreamPresenter:
    def __init__(
        self, sender: Sender, rooms: Rooms, logger: logging.Logger, *, interval_s: float
    ) -> None:
        self._sender = sender
        self._rooms = rooms
        self._logger = logger
        self.interval_s = interval_s
        self._streams: dict[str, _Stream] = {}

    async def start(self, address: str) -> None:
        """Never raises: a failing typing notice must not fail the turn."""
        try:
            stream = _Stream(await self._rooms.target(address))
        except (ValueError, TimeoutError) as exc:
            self._logger.error("cannot stream to %s: %s", address, exc)
            return
        self._streams[address] = stream
        await self._typing(stream, True)

    async def chunk(self, address: str, delta: str) -> None:
        stream = self._streams.get(address)
        if stream is None:
            return
        stream.text += delta
        await self._preview(stream)

    async def status(self, address: str, status: str) -> None:
        stream = self._streams.get(address)
        if stream is not None and time.monotonic() - stream.last_typing >= TYPING_REFRESH_S:
            await self._typing(stream, True)

    async def end(self, address: str, full_text: str) -> None:
        """Show the final text; raises when it cannot be delivered (the bus retries)."""
        stream = self._streams.pop(address, None) or _Stream(await self._rooms.target(address))
        pieces = split_text(full_text or stream.text, MAX_BODY_CHARS)
        if not pieces:
            await self._typing(stream, False)
            return
        rest = pieces
        await _sleep_until(stream.hold_until)  # a rate limit seen while previewing
        if stream.event_id is not None:
            first, rest = pieces[0], pieces[1:]
            if first != stream.shown:
                await _sleep_until(stream.last_edit + self.interval_s)
                await self._sender.edit_piece(stream.room_id, stream.event_id, first)
        for piece in rest:
            await self._sender.send_piece(stream.room_id, piece)
        await self._typing(stream, False)

    async def _preview(self, stream: _Stream) -> None:
        text = stream.text.rstrip()
        now = time.monotonic()
        if not text.strip() or len(text) > MAX_BODY_CHARS or text == stream.shown:
            return
        if now < stream.hold_until or now < stream.started + self.interval_s:
            return
        if stream.event_id is not None and now < stream.last_edit + self.interval_s:
            return
        try:
            if stream.event_id is None:
                stream.event_id = await self._sender.send_piece(stream.room_id, text, attempts=1)
            else:
                await self._sender.edit_piece(stream.room_id, stream.event_id, text, attempts=1)
        except MatrixSendError as exc:
            stream.hold_until = time.monotonic() + exc.retry_after_s
            self._logger.debug("preview for room %s postponed: %s", stream.room_id, exc)
            return
        except Exception as exc:  # a preview is best-effort; the final text is not
            self._logger.debug("preview for room %s skipped: %s", stream.room_id, exc)
            return
        stream.shown = text
        stream.last_edit = time.monotonic()

    async def _typing(self, stream: _Stream, typing: bool) -> None:
        stream.last_typing = time.monotonic()
        try:
            async with asyncio.timeout(5):
                await self._sender.client.room_typing(
                    stream.room_id, typing, timeout=TYPING_TIMEOUT_MS
                )
        except Exception as exc:  # a typing notice is cosmetic
            self._logger.debug("typing notice for room %s failed: %s", stream.room_id, exc)


async def _sleep_until(deadline: float) -> None:
    wait = deadline - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)
