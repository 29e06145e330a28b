"""Requests waiting for their reply, found by the tag of their reply address.

Every request journals its message as ``<conversation>#reply:<tag>``
(``contract.reply_address``, ADR 0024); the kernel keys the conversation by
the address alone and sends the reply — a stream, or ``send_to_user`` for a
command or a retried reply — to the tagged id, so ``ReplyBook`` hands it to
the request that asked. A tag with no request waiting (the client left, or a
reminder set in that turn fires later) is the caller's to keep as a
notification. Tags of requests with an ``Idempotency-Key`` are derived from
the key, its caller and the conversation it names, so a retry waits on the
same tag and gets the same reply (the channel refuses the key with another
body: ``openai_shape.key_reused``).

A request without one still has a *retry key* (its caller, conversation and
messages, hashed): while the turn it started runs — also after the request
itself gave up with 504 — the same request again joins it instead of
running the message a second time. A reply to a question's old tag (the
turn resumed after an approval answered from another request) goes to the
request that answered (``alias``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

IDEMPOTENT_PREFIX = "k"
REMEMBERED = 1024
RUNNING_KEPT = 256  # turns still running whose requests all gave up (a retry joins them)
RETRY_WINDOW_S = 120.0  # a reply that came while no request waited: a retry still gets it


class ReplyGoneError(Exception):
    """Hearth is stopping: the reply will not come on this request."""


def request_tag() -> str:
    return f"r{uuid.uuid4().hex}"


def idempotent_tag(caller: str, conversation: str, key: str) -> str:
    """A key is its caller's, in the conversation it names (ADR 0075)."""
    digest = hashlib.sha256(f"{caller}\0{conversation}\0{key}".encode()).hexdigest()
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
        self.wants_stream = False  # a request holding it reads the reply as SSE
        self._chunks: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[str] = loop.create_future()
        self._chunks_taken = False
        # post-processor results (``postprocess.results``) when the message asked for some
        self.expects_results = False
        self._results: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.turn_id: str | None = None  # the kernel's turn (``GET /v1/postprocess/ID``)
        self.chat_row: int | None = None  # the web page's message it answers (its tags)
        self.usage: dict[str, int] | None = None  # the turn's tokens, with its reply
        self.questions: dict[str, dict[str, Any]] = {}  # approvals waiting, by id
        self.retry_key: str | None = None
        self.unclaimed_at: float | None = None  # finished while no request waited
        self.on_page = False  # a message of the web page's chat: its reply is kept too
        self.turns: list[Any] | None = None  # the client's chat, when it names no conversation
        self.caller = ""  # who asked (the chat's digest is the caller's)
        self.files: list[dict[str, Any]] = []  # the turn's files (``hearth.files``, ADR 0096)

    @property
    def done(self) -> bool:
        return self._done.done()

    def put_chunk(self, text: str) -> None:
        if not self.done:
            self._chunks.put_nowait(text)

    def finish(self, text: str, usage: dict[str, int] | None = None) -> None:
        if not self.done:
            if usage is not None:
                self.usage = usage
            self._done.set_result(text)
            self._chunks.put_nowait(None)

    def fail(self, error: Exception) -> None:
        if not self.done:
            self._done.set_exception(error)
            self._done.exception()  # retrieved: a turn nobody waits for any more is no leak
            self._chunks.put_nowait(None)

    def set_results(self, results: dict[str, Any], turn_id: str | None = None) -> None:
        if not self._results.done():
            self.turn_id = turn_id
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

    @property
    def ended(self) -> asyncio.Future[str]:
        """The future ``result`` waits on, for ``asyncio.wait`` beside a disconnect
        without a task and a shield of its own per request (two fewer hops of the event
        loop between the reply and the response). Never cancel it: every request that
        joined the reply waits on it."""
        return self._done

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
        self._running: dict[str, str] = {}  # retry key -> tag of the turn it started
        self._unheld: OrderedDict[str, None] = OrderedDict()  # running, nobody waits
        self._aliases: dict[str, str] = {}  # a question's old tag -> the answering tag

    @property
    def in_flight(self) -> int:
        """Requests waiting now (a turn whose requests all gave up is not counted)."""
        return sum(1 for pending in self._pending.values() if pending.waiting > 0)

    def join(self, tag: str) -> PendingReply | None:
        """The pending reply of ``tag`` (a retry with the same idempotency key), held
        once more; ``None`` when none is open."""
        pending = self._pending.get(tag)
        if pending is not None:
            pending.waiting += 1
            self._unheld.pop(tag, None)
        return pending

    def running(self, retry_key: str) -> PendingReply | None:
        """The turn a request with ``retry_key`` started, while it runs (or its reply, for
        ``RETRY_WINDOW_S`` after it came with no request waiting): a retry joins it."""
        pending = self._pending.get(self._running.get(retry_key, ""))
        if pending is None:
            return None
        if pending.done:  # answered while nobody waited: the retry gets it, once
            self._forget(pending)
            if time.monotonic() - (pending.unclaimed_at or 0.0) > RETRY_WINDOW_S:
                return None
        pending.waiting += 1
        self._unheld.pop(pending.tag, None)
        return pending

    def started(self, pending: PendingReply, retry_key: str) -> None:
        pending.retry_key = retry_key
        self._running[retry_key] = pending.tag

    def alias(self, old_tag: str, pending: PendingReply) -> None:
        """Replies to ``old_tag`` (a paused turn, resumed by this request's answer) go
        to ``pending``."""
        self._aliases[old_tag] = pending.tag

    def find(self, tag: str | None) -> PendingReply | None:
        tag = tag or ""
        return self._pending.get(self._aliases.get(tag, tag))

    def open(self, conversation: str, tag: str) -> PendingReply:
        """The pending reply of ``tag``: a new one, or the one a retry joins."""
        pending = self._pending.get(tag)
        if pending is not None:
            pending.waiting += 1
            return pending
        pending = self._pending[tag] = PendingReply(conversation, tag)
        return pending

    def release(self, pending: PendingReply) -> None:
        """A request holding ``pending`` is finished (answered, timed out or gone). A
        turn still running stays findable by its retry key (at most ``RUNNING_KEPT``)."""
        pending.waiting -= 1
        if pending.waiting > 0 or self._pending.get(pending.tag) is not pending:
            return
        if pending.done or pending.retry_key is None:
            self._forget(pending)
            return
        self._unheld[pending.tag] = None
        while len(self._unheld) > RUNNING_KEPT:
            self._forget(self._pending[self._unheld.popitem(last=False)[0]])

    def drop(self, pending: PendingReply) -> None:
        """The request's message was never journaled: nothing runs, nobody may join."""
        pending.waiting -= 1
        if self._pending.get(pending.tag) is pending and pending.waiting <= 0:
            self._forget(pending)

    def _forget(self, pending: PendingReply) -> None:
        self._pending.pop(pending.tag, None)
        self._unheld.pop(pending.tag, None)
        if pending.retry_key is not None and self._running.get(pending.retry_key) == pending.tag:
            del self._running[pending.retry_key]
        for old in [old for old, new in self._aliases.items() if new == pending.tag]:
            del self._aliases[old]

    def waiting(self, tag: str | None) -> bool:
        """Whether a request waits under ``tag`` now."""
        pending = self.find(tag)
        return pending is not None and pending.waiting > 0

    def remember(self, tag: str, text: str) -> None:
        """The first reply of an idempotent tag (a later message to it is not one)."""
        if tag not in self._remembered:
            self._remembered[tag] = text
            if len(self._remembered) > REMEMBERED:
                self._remembered.popitem(last=False)

    def remembered(self, tag: str) -> str | None:
        return self._remembered.get(tag)

    # ------------------------------------------------------------ from the kernel

    def stream_started(self, tag: str | None) -> bool:
        """The turn ``tag`` names began (its reply is the stream's end); whether it
        should send text as it comes: only for a request that reads the reply as SSE
        (a whole reply is cheaper for the kernel to produce)."""
        pending = self.find(tag)
        if pending is None:
            return False
        pending.streaming = True
        return pending.wants_stream

    def chunk(self, tag: str | None, text: str) -> None:
        pending = self.find(tag)
        if pending is not None:
            pending.put_chunk(text)

    def results(self, tag: str | None, results: dict[str, Any], turn_id: str | None) -> None:
        pending = self.find(tag)
        if pending is not None:
            pending.set_results(results, turn_id)

    def stream_paused(self, tag: str | None) -> None:
        """The turn paused for an approval: its reply will come unstreamed."""
        pending = self.find(tag)
        if pending is not None:
            pending.streaming = False

    def question(self, tag: str | None, question: dict[str, Any]) -> bool:
        """An approval asked in the turn ``tag`` answers: it comes with the reply."""
        pending = self.find(tag)
        if pending is None or pending.done:
            return False
        pending.questions[str(question["id"])] = question
        return True

    def deliver(
        self,
        tag: str | None,
        text: str,
        *,
        stream_end: bool,
        usage: dict[str, int] | None = None,
    ) -> bool:
        """Finish the request ``tag`` names; ``False`` when none waits for this text.

        While a stream is open for the request, only its end is the reply: a
        ``send_to_user`` then is a proactive message sent during the turn. A turn
        whose requests all gave up is finished and forgotten, and ``False``."""
        pending = self.find(tag)
        if pending is None or pending.done or (pending.streaming and not stream_end):
            return False
        pending.finish(text, usage)
        if pending.waiting <= 0:  # kept a while for a retry (``running``), else forgotten
            pending.unclaimed_at = time.monotonic()
            if pending.retry_key is None:
                self._forget(pending)
            return False
        return True

    def fail_all(self, error: Exception) -> None:
        for pending in list(self._pending.values()):
            pending.fail(error)
