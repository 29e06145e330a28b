"""Showing a reply while it is generated: one platform message, edited at a bounded rate.

Every chat channel that streams (Telegram, Discord, Slack, Matrix) shows a
reply the same way, so the rule lives here once and a channel gives only its
platform calls (``EditedStream`` subclasses):

- Text is first shown once the stream has run ``interval_s``: a reply ready
  sooner is sent whole, once, with no edit to wait for (a turn that waited out
  the edit interval held its conversation for it, so a backlog drained at
  less than one message a second, issue 41).
- Later chunks edit that message at most once per ``interval_s`` (the
  platform's rate limit) and only when the text changed; while the text is
  longer than one message (``limit``, in UTF-16 units as ``split_text``
  counts) the preview is left as it is.
- Previews are best effort: one attempt; an error the platform gives a wait
  for (flood control, ``429``) postpones the next preview by that wait, any
  other of ``preview_errors`` skips this one.
- The final text waits out a postponement and the edit interval, replaces the
  preview, and what does not fit goes out as more messages; it raises when it
  cannot be delivered, so the caller (the outbox) retries it. A channel may
  name the errors of that last edit after which the text is sent anew
  (``refused_edits``).
- A "typing…" indicator is shown at the start and refreshed while tools run
  (``status``) every ``typing_refresh_s``; a channel without one leaves it
  ``None``.

A channel extension inherits ``EditedStreamChannel`` for the four
``on_stream_*`` hooks that hand each call to its presenter.

Time is read through ``clock`` and waited through ``sleep``, so tests drive
the throttle without sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from core.extensions.sdk.splitting import split_text, utf16_len

__all__ = ["EditedStream", "EditedStreamChannel"]

Where = TypeVar("Where")
"""Where a stream's messages go: a chat id, a channel id, a room id, a target."""
MessageId = TypeVar("MessageId")
"""What names one sent message so it can be edited."""

TYPING_TIMEOUT_S = 5.0


@dataclass
class _Stream(Generic[Where, MessageId]):
    """One reply in progress: its text so far, what is shown of it and when."""

    where: Where
    started: float
    text: str = ""
    message: MessageId | None = None
    shown: str | None = None
    last_edit: float = 0.0
    hold_until: float = 0.0
    last_typing: float = 0.0


class EditedStream(ABC, Generic[Where, MessageId]):
    """One streamed reply per address, shown by editing one message.

    A subclass gives ``target`` (the address's destination), ``send`` and
    ``edit`` (the platform calls; ``preview`` says one attempt, no retries), and
    may give ``retry_after`` (a preview error's wait), ``typing`` and the class
    attributes below."""

    target_errors: ClassVar[tuple[type[Exception], ...]] = (ValueError,)
    """Errors of ``target`` that ``start`` logs instead of raising."""
    preview_errors: ClassVar[tuple[type[Exception], ...]] = (Exception,)
    """Errors of a preview's ``send``/``edit`` that skip or postpone it."""
    refused_edits: ClassVar[tuple[type[Exception], ...]] = ()
    """Errors of the final edit after which the text is sent as a new message."""
    typing_refresh_s: ClassVar[float | None] = None
    """How often ``status`` shows "typing…" again; ``None``: never."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        limit: int,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.logger = logger
        self.limit = limit
        self.interval_s = interval_s
        self._clock = clock
        self._sleep = sleep
        self._streams: dict[str, _Stream[Where, MessageId]] = {}

    # ------------------------------------------------------------ platform

    @abstractmethod
    async def target(self, address: str) -> Where:
        """Where the replies for ``address`` go; raises when it is not served."""

    @abstractmethod
    async def send(self, where: Where, text: str, *, preview: bool) -> MessageId:
        """Send ``text`` as a new message."""

    @abstractmethod
    async def edit(self, where: Where, message: MessageId, text: str, *, preview: bool) -> None:
        """Replace the text of ``message``."""

    def retry_after(self, exc: Exception) -> float | None:
        """The wait a preview error asks for (a rate limit); ``None``: none."""
        return None

    def unchanged(self, exc: Exception) -> bool:
        """Whether one of ``refused_edits`` says the text was already shown."""
        return False

    async def typing(self, where: Where, on: bool) -> None:
        """Show (``on``) or stop the typing indicator; the default has none."""

    # ------------------------------------------------------------ the stream

    async def start(self, address: str) -> None:
        """Never raises: an address not served fails at the end, loudly."""
        try:
            stream = _Stream[Where, MessageId](await self.target(address), self._clock())
        except self.target_errors as exc:
            self.logger.error("cannot stream to %s: %s", address, exc)
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
        """A tool is running: "typing…" is shown again when it is due."""
        stream = self._streams.get(address)
        refresh = self.typing_refresh_s
        if stream is None or refresh is None:
            return
        if self._clock() - stream.last_typing >= refresh:
            await self._typing(stream, True)

    async def end(self, address: str, full_text: str) -> None:
        """Show the final text; raises when it cannot be delivered (the outbox retries)."""
        stream = self._streams.pop(address, None)
        if stream is None:
            stream = _Stream[Where, MessageId](await self.target(address), self._clock())
        pieces = split_text(full_text or stream.text, self.limit)
        if pieces:
            await self._sleep_until(stream.hold_until)  # a rate limit seen while previewing
            rest = pieces
            if stream.message is not None:
                first, rest = pieces[0], pieces[1:]
                if first != stream.shown:
                    await self._sleep_until(stream.last_edit + self.interval_s)
                    await self._replace(stream, stream.message, first)
            for piece in rest:
                await self.send(stream.where, piece, preview=False)
        await self._typing(stream, False)

    # ------------------------------------------------------------ internals

    async def _preview(self, stream: _Stream[Where, MessageId]) -> None:
        text = stream.text.rstrip()
        now = self._clock()
        if not text.strip() or utf16_len(text) > self.limit or text == stream.shown:
            return
        if now < stream.hold_until or now < stream.started + self.interval_s:
            return
        if stream.message is not None and now < stream.last_edit + self.interval_s:
            return
        try:
            if stream.message is None:
                stream.message = await self.send(stream.where, text, preview=True)
            else:
                await self.edit(stream.where, stream.message, text, preview=True)
        except self.preview_errors as exc:
            wait = self.retry_after(exc)
            if wait is not None:
                stream.hold_until = self._clock() + wait
            self.logger.debug(
                "preview for %s %s: %s", stream.where, "skipped" if wait is None else "held", exc
            )
            return
        stream.shown = text
        stream.last_edit = self._clock()

    async def _replace(
        self, stream: _Stream[Where, MessageId], message: MessageId, text: str
    ) -> None:
        try:
            await self.edit(stream.where, message, text, preview=False)
        except self.refused_edits as exc:
            if self.unchanged(exc):
                return
            self.logger.warning("could not edit the streamed message (%s); sending anew", exc)
            await self.send(stream.where, text, preview=False)

    async def _typing(self, stream: _Stream[Where, MessageId], on: bool) -> None:
        if self.typing_refresh_s is None:
            return
        stream.last_typing = self._clock()
        try:
            async with asyncio.timeout(TYPING_TIMEOUT_S):
                await self.typing(stream.where, on)
        except Exception as exc:  # a typing indicator is cosmetic: it never fails the turn
            self.logger.debug("typing indicator for %s failed: %s", stream.where, exc)

    async def _sleep_until(self, deadline: float) -> None:
        wait = deadline - self._clock()
        if wait > 0:
            await self._sleep(wait)


class EditedStreamChannel(ABC):
    """The ``StreamingChannelProvider`` hooks of a channel whose replies stream
    through an ``EditedStream``: each hands its call to ``edited_stream()``."""

    @abstractmethod
    def edited_stream(self) -> EditedStream[Any, Any]:
        """The channel's presenter (built in ``initialize``)."""

    async def on_stream_start(self, user_id: str) -> None:
        await self.edited_stream().start(user_id)

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        await self.edited_stream().chunk(user_id, chunk)

    async def on_stream_status(self, user_id: str, status: str) -> None:
        await self.edited_stream().status(user_id, status)

    async def on_stream_end(self, user_id: str, full_text: str) -> None:
        await self.edited_stream().end(user_id, full_text)
