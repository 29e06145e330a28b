"""Showing a reply while it is generated: one message, edited at a bounded rate.

Text is first shown once the stream has run ``interval_s`` (a reply ready
sooner is sent whole, once, with no edit to wait for); later chunks edit that
message at most once per ``interval_s`` and only when the text changed. While
it is too long for one message the preview is left as it is. Previews are
best effort (one attempt; a ``RateLimited`` postpones the next one until its
``retry_after``). The final text is retried like any send, waits out the edit
interval, and is split into more messages when it is longer than 2,000
characters. "Typing…" is shown at the start and refreshed while tools run.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import discord

from core.extensions.sdk import split_text, utf16_len

from .sender import MAX_MESSAGE_UNITS, Sender
from .targets import Targets

TYPING_REFRESH_S = 8.0  # Discord shows "typing…" for about 10 s


@dataclass
class _Stream:
    channel_id: int
    text: str = ""
    message_id: int | None = None
    shown: str | None = None
    last_edit: float = 0.0
    hold_until: float = 0.0
    last_typing: float = 0.0
    started: float = field(default_factory=time.monotonic)


class StreamPresenter:
    def __init__(
        self, sender: Sender, targets: Targets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        self._sender = sender
        self._targets = targets
        self._logger = logger
        self.interval_s = interval_s
        self._streams: dict[str, _Stream] = {}

    async def start(self, user_id: str) -> None:
        """Never raises: a failing typing indicator must not fail the turn."""
        try:
            channel_id = await self._sender.channel_id(self._targets.target(user_id))
        except (ValueError, discord.DiscordException) as exc:
            self._logger.error("cannot stream to %s: %s", user_id, exc)
            return
        stream = self._streams[user_id] = _Stream(channel_id)
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
        stream = self._streams.pop(user_id, None)
        if stream is None:
            stream = _Stream(await self._sender.channel_id(self._targets.target(user_id)))
        pieces = split_text(full_text or stream.text, MAX_MESSAGE_UNITS)
        if not pieces:
            return
        rest = pieces
        await _sleep_until(stream.hold_until)  # a rate limit seen while previewing
        if stream.message_id is not None:
            first, rest = pieces[0], pieces[1:]
            if first != stream.shown:
                await _sleep_until(stream.last_edit + self.interval_s)
                await self._sender.edit_piece(stream.channel_id, stream.message_id, first)
        for piece in rest:
            await self._sender.send_piece(stream.channel_id, piece)

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
                stream.message_id = await self._sender.send_piece(
                    stream.channel_id, text, attempts=1
                )
            else:
                await self._sender.edit_piece(
                    stream.channel_id, stream.message_id, text, attempts=1
                )
        except discord.RateLimited as exc:
            stream.hold_until = time.monotonic() + exc.retry_after
            return
        except (discord.DiscordException, OSError) as exc:
            self._logger.debug("preview in channel %d skipped: %s", stream.channel_id, exc)
            return
        stream.shown = text
        stream.last_edit = time.monotonic()

    async def _typing(self, stream: _Stream) -> None:
        stream.last_typing = time.monotonic()
        try:
            async with asyncio.timeout(5):
                await self._sender.typing(stream.channel_id)
        except (discord.DiscordException, OSError, TimeoutError) as exc:
            self._logger.debug("typing in channel %d failed: %s", stream.channel_id, exc)


async def _sleep_until(deadline: float) -> None:
    wait = deadline - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)
