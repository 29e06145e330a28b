"""Requests waiting for their reply, found by the tag of their reply address.

Every request journals its message as ``<conversation>#reply:<tag>``
(``contract.reply_address``, ADR 0024); the kernel keys the conversation by
the address alone and sends the reply — a stream, or ``send_to_user`` for a
command or a retried reply — to the tagged id, so ``ReplyBook`` hands it to
the request that asked. A tag with no request waiting (the client left, or a
reminder set in that turn fires later) is the caller's to keep as a
notification. Tags of requests with an ``Idempotency-Key`` are derived from
the key, so a retry waits on the same tag and gets the same reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

IDEMPOTENT_PREFIX = "k"
REMEMBERED = 1024


class ReplyGoneError(Exception):
    """Hearth is stopping: the reply will not come on this request."""


def request_tag() -> str:
    return f"r{uuid.uuid4().hex}"


def idempotent_tag(conversation: str, key: str) -> str:
    digest = hashlib.sha256(f"{conversation}\0{key}".encode()).hexdigest()
    return f"{IDEMPOTENT_PREFIX}{digest[:40]}"


def is_idempotent(tag: str) -> bool:
    return tag.startswith(IDEMPOTENT_PREFIX)


class PendingReply:
    """One reply some requests wait for: its text deltas (one reader) and its end."""

    def __init__(self, conversation: str, tag: str) -> None:
        self.conversation = conversation
        self.tag = tag
        self.waiting = 1  # requests holding it (a retry with the same key joins)
        self.streaming = False  # the kernel opened a stream for it
        self._chunks: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[str] = loop.create_future()
        self._chunks_taken = False
        # post-processor results (``postprocess.results``) when the message asked for some
        self.expects_results = False
        self._results: asyncio.Future[dict[str, Any]] = loop.create_future()

    @property
    def done(self) -> bool:
        return self._done.done()

    def put_chunk(self, text: str) -> None:
        if not self.done:
            self._chunks.put_nowait(text)

    def finish(self, text: str) -> None:
        if not self.done:
            self._done.set_result(text)
            self._chunks.put_nowait(None)

    def fail(self, error: Exception) -> None:
        if not self.done:
            self._done.set_exception(error)
            self._chunks.put_nowait(None)

    def set_results(self, results: dict[str, Any]) -> None:
        if not self._results.done():
            self._results.set_result(results)

    async def post_results(self, timeout_s: float) -> dict[str, Any] | None:
        """The post-processors' results of this message, if it asked for any and they
        come within ``timeout_s`` (they are journaled before the reply, so they are
        normally there already)."""
        if not self.expects_results:
            return None
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(self._results)
        except TimeoutError:
            return None

    async def result(self) -> str:
        """The whole reply (the recorded text, which may differ from the deltas)."""
        return await asyncio.shield(self._done)

    async def chunks(self) -> AsyncIterator[str]:
        """The text deltas as they come; only the first reader gets them (a retry
        joining later reads ``result`` instead)."""
        if self._chunks_taken:
            return
        self._chunks_taken = True
        while (chunk := await self._chunks.get()) is not None:
            yield chunk


class ReplyBook:
    """The waiting requests by tag, and the newest idempotent replies."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingReply] = {}
        self._remembered: OrderedDict[str, str] = OrderedDict()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def open(self, conversation: str, tag: str) -> PendingReply:
        """The pending reply of ``tag``: a new one, or the one a retry joins."""
        pending = self._pending.get(tag)
        if pending is not None:
            pending.waiting += 1
            return pending
        pending = self._pending[tag] = PendingReply(conversation, tag)
        return pending

    def release(self, pending: PendingReply) -> None:
        """A request holding ``pending`` is finished (answered, timed out or gone)."""
        pending.waiting -= 1
        if pending.waiting <= 0 and self._pending.get(pending.tag) is pending:
            del self._pending[pending.tag]

    def waiting(self, tag: str | None) -> bool:
        """Whether a request waits under ``tag`` now."""
        return (tag or "") in self._pending

    def remember(self, tag: str, text: str) -> None:
        """The first reply of an idempotent tag (a later message to it is not one)."""
        if tag not in self._remembered:
            self._remembered[tag] = text
            if len(self._remembered) > REMEMBERED:
                self._remembered.popitem(last=False)

    def remembered(self, tag: str) -> str | None:
        return self._remembered.get(tag)

    # ------------------------------------------------------------ from the kernel

    def stream_started(self, tag: str | None) -> None:
        pending = self._pending.get(tag or "")
        if pending is not None:
            pending.streaming = True

    def chunk(self, tag: str | None, text: str) -> None:
        pending = self._pending.get(tag or "")
        if pending is not None:
            pending.put_chunk(text)

    def results(self, tag: str | None, results: dict[str, Any]) -> None:
        pending = self._pending.get(tag or "")
        if pending is not None:
            pending.set_results(results)

    def deliver(self, tag: str | None, text: str, *, stream_end: bool) -> bool:
        """Finish the request ``tag`` names; ``False`` when none waits for this text.

        While a stream is open for the request, only its end is the reply: a
        ``send_to_user`` then is a proactive message sent during the turn."""
        pending = self._pending.get(tag or "")
        if pending is None or pending.done or (pending.streaming and not stream_end):
            return False
        pending.finish(text)
        return True

    def fail_all(self, error: Exception) -> None:
        for pending in list(self._pending.values()):
            pending.fail(error)
