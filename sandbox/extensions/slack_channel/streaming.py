"""Showing a reply while it is generated: one message, edited at a bounded rate.

As in the Telegram channel (issue 41): text is first shown once the stream
has run ``interval_s`` (a reply ready sooner is posted whole, once, with no
edit); later chunks ``chat.update`` that message at most once per
``interval_s`` and only when the text changed. Previews go through the
client without retries (one attempt; a ``429`` postpones the next preview by
its ``Retry-After``). The final text is sent like any reply (rate limits
honoured by the retrying client), waits out the edit interval, and is split
into more messages when it is too long for one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError

from core.extensions.sdk import split_text

from .sender import MAX_MESSAGE_CHARS, Sender, retry_after_s
from .targets import Target, Targets


@dataclass
class _Stream:
    target: Target
    text: str = ""
    channel: str | None = None
    ts: str | None = None
    shown: str | None = None
    last_edit: float = 0.0
    hold_until: float = 0.0
    started: float = field(default_factory=time.monotonic)


class StreamPresenter:
    """One streamed reply per address, edited at a bounded rate."""

    def __init__(
        self, sender: Sender, targets: Targets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        self._sender = sender
        self._targets = targets
        self._log = logger
        self.interval_s = interval_s
        self._streams: dict[str, _Stream] = {}

    async def start(self, address: str) -> None:
        """Never raises: an address the bot does not serve fails at the end, loudly."""
        try:
            self._streams[address] = _Stream(self._targets.target(address))
        except ValueError as exc:
            self._log.error("cannot stream to %s: %s", address, exc)

    async def chunk(self, address: str, delta: str) -> None:
        stream = self._streams.get(address)
        if stream is None:
            return
        stream.text += delta
        await self._preview(stream)

    async def end(self, address: str, full_text: str) -> None:
        """Show the final text; raises when it cannot be delivered (the outbox retries)."""
        stream = self._streams.pop(address, None) or _Stream(self._targets.target(address))
        pieces = split_text(full_text or stream.text, MAX_MESSAGE_CHARS)
        if not pieces:
            return
        rest = pieces
        await _sleep_until(stream.hold_until)  # a rate limit seen while previewing
        if stream.ts is not None and stream.channel is not None:
            first, rest = pieces[0], pieces[1:]
            if first != stream.shown:
                await _sleep_until(stream.last_edit + self.interval_s)
                await self._sender.update(stream.channel, stream.ts, first)
        for piece in rest:
            await self._sender.post(stream.target, piece)

    async def _preview(self, stream: _Stream) -> None:
        text = stream.text.rstrip()
        now = time.monotonic()
        if not text.strip() or len(text) > MAX_MESSAGE_CHARS or text == stream.shown:
            return
        if now < stream.hold_until or now < stream.started + self.interval_s:
            return
        if stream.ts is not None and now < stream.last_edit + self.interval_s:
            return
        try:
            if stream.ts is None or stream.channel is None:
                stream.channel, stream.ts = await self._sender.post(
                    stream.target, text, preview=True
                )
            else:
                await self._sender.update(stream.channel, stream.ts, text, preview=True)
        except SlackApiError as exc:
            wait = retry_after_s(exc)
            if wait is not None:
                stream.hold_until = time.monotonic() + wait
            else:
                self._log.debug("preview skipped: %s", exc)
            return
        except (ClientError, OSError, TimeoutError) as exc:
            self._log.debug("preview skipped: %s", exc)
            return
        stream.shown = text
        stream.last_edit = time.monotonic()


async def _sleep_until(deadline: float) -> None:
    wait = deadline - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)
