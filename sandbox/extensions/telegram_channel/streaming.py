"""Showing a reply while it is generated: one message, edited at a bounded rate.

Text is first shown once the stream has run ``interval_s`` (a reply ready
sooner is sent whole, once, with no edit to wait for: a turn that waited out
the edit interval held its conversation for it, so a backlog drained at less
than one message a second, issue 41); later chunks edit that message at most
once per ``interval_s`` and only when the text changed. Previews are best-effort
(one attempt; flood control postpones the next one). The final text is
retried like any send, waits out the edit interval, and is split into more
messages when it is too long for one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from telegram.constants import ChatAction
from telegram.error import BadRequest, RetryAfter, TelegramError

from core.extensions.sdk import split_text, utf16_len

from .chats import ChatTargets
from .sender import MAX_MESSAGE_UNITS, Sender, is_not_modified, retry_after_seconds

TYPING_REFRESH_S = 4.0


@dataclass
class _Stream:
    chat_id: int
    text: str = ""
    message_id: int | None = None
    shown: str | None = None
    last_edit: float = 0.0
    hold_until: float = 0.0
    last_typing: float = 0.0
    started: float = field(default_factory=time.monotonic)


class StreamPresenter:
    def __init__(
        self, sender: Sender, chats: ChatTargets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        self._sender = sender
        self._chats = chats
        self._logger = logger
        self.interval_s = interval_s
        self._streams: dict[str, _Stream] = {}

    async def start(self, user_id: str) -> None:
        """Never raises: a failing chat action must not fail the turn."""
        try:
            stream = _Stream(self._chats.chat_for(user_id))
        except ValueError as exc:
            self._logger.error("cannot stream to %s: %s", user_id, exc)
            return
        self._streams[user_id] = stream
        await self._typing(stream)

    async def chunk(self, user_id: str, delta: str) -> None:
        stream = self._streams.get(user_id)
        if stream is None:
            return
        stream.text += delta
        await self._preview(stream)

    async def status(self, user_id: str, status: str) -> None:
        stream = self._streams.get(user_id)
        if stream is not None and time.monotonic() - stream.last_typing >= TYPING_REFRESH_S:
            await self._typing(stream)

    async def end(self, user_id: str, full_text: str) -> None:
        """Show the final text; raises when it cannot be delivered (the bus retries)."""
        stream = self._streams.pop(user_id, None) or _Stream(self._chats.chat_for(user_id))
        pieces = split_text(full_text or stream.text, MAX_MESSAGE_UNITS)
        if not pieces:
            return
        rest = pieces
        await _sleep_until(stream.hold_until)  # flood control seen while previewing
        if stream.message_id is not None:
            first, rest = pieces[0], pieces[1:]
            if first != stream.shown:
                await self._replace(stream, stream.message_id, first)
        for piece in rest:
            await self._sender.send_piece(stream.chat_id, piece)

    # ------------------------------------------------------------ internals

    async def _preview(self, stream: _Stream) -> None:
        text = stream.text.rstrip()
        now = time.monotonic()
        if not text.strip() or utf16_len(text) > MAX_MESSAGE_UNITS or text == stream.shown:
            return
        if now < stream.hold_until or now < stream.started + self.interval_s:
            return
        if stream.message_id is not None and now < stream.last_edit + self.interval_s:
            return
        try:
            if stream.message_id is None:
                stream.message_id = await self._sender.send_piece(stream.chat_id, text, attempts=1)
            else:
                await self._sender.edit_piece(stream.chat_id, stream.message_id, text, attempts=1)
        except RetryAfter as exc:
            stream.hold_until = time.monotonic() + retry_after_seconds(exc)
            return
        except TelegramError as exc:
            self._logger.debug("preview for chat %d skipped: %s", stream.chat_id, exc)
            return
        stream.shown = text
        stream.last_edit = time.monotonic()

    async def _replace(self, stream: _Stream, message_id: int, text: str) -> None:
        await _sleep_until(stream.last_edit + self.interval_s)
        try:
            await self._sender.edit_piece(stream.chat_id, message_id, text)
        except BadRequest as exc:
            if is_not_modified(exc):
                return
            self._logger.warning("could not edit the streamed message (%s); sending anew", exc)
            await self._sender.send_piece(stream.chat_id, text)

    async def _typing(self, stream: _Stream) -> None:
        stream.last_typing = time.monotonic()
        try:
            async with asyncio.timeout(5):
                await self._sender.bot.send_chat_action(stream.chat_id, ChatAction.TYPING)
        except (TelegramError, TimeoutError) as exc:
            self._logger.debug("typing action for chat %d failed: %s", stream.chat_id, exc)


async def _sleep_until(deadline: float) -> None:
    wait = deadline - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)
