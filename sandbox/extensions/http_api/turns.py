"""Waiting for a turn's reply, the same for every endpoint that runs one.

``/v1/chat/completions`` and ``/v1/responses`` differ only in their wire
shapes: both hand an ``Ask`` to the channel, then wait for the whole reply
(``whole_reply``) or read it as it streams (``streamed_reply``, which yields
``Delta`` pieces and ends with a ``Finished``). Either way, once the client
has the reply, the channel hears what it was shown (``answered``), which is
what the next request of a client that resends its history will quote.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .config import ApiConfig
from .openai_shape import ApiError
from .questions import waiting_text
from .replies import PendingReply, ReplyGoneError

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
POST_RESULTS_WAIT_S = 5.0  # journaled before the reply: normally already there


class TurnBackend(Protocol):
    config: ApiConfig

    async def answered(self, pending: PendingReply, shown: str) -> None: ...
    def release(self, pending: PendingReply) -> None: ...


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a streamed reply: the text the client did not see yet (``tail``),
    the extra fields (``hearth``), the usage, and the whole text as shown."""

    tail: str
    extra: dict[str, Any] | None
    usage: dict[str, int] | None
    shown: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: ApiError


async def whole_reply(
    request: Request, backend: TurnBackend, pending: PendingReply
) -> tuple[str, dict[str, Any] | None]:
    """The reply (as shown) and its extra fields; the request's hold ends here."""
    try:
        reply = shown_text(
            pending, await _reply_or_gone(request, pending, backend.config.reply_timeout_s)
        )
        extra = await extra_fields(pending)
    finally:
        backend.release(pending)
    await backend.answered(pending, reply)
    return reply, extra


async def streamed_reply(
    backend: TurnBackend, pending: PendingReply
) -> AsyncIterator[Delta | Finished | Failed]:
    timeout_s = backend.config.reply_timeout_s
    streamed: list[str] = []
    try:
        async with asyncio.timeout(timeout_s):
            async for piece in pending.chunks():
                streamed.append(piece)
                yield Delta(piece)
            reply = shown_text(pending, await pending.result())
    except TimeoutError:
        yield Failed(late(timeout_s))
        return
    except ReplyGoneError as exc:
        yield Failed(stopping(exc))
        return
    seen = "".join(streamed)
    tail = _unsent(reply, seen)
    extra = await extra_fields(pending)
    await backend.answered(pending, seen + tail)
    yield Finished(tail, extra, pending.usage, seen + tail)


def shown_text(pending: PendingReply, reply: str) -> str:
    """What the client is shown: a question's wording when the turn waits for one."""
    if pending.questions and not reply:
        return waiting_text(list(pending.questions.values()))
    return reply


async def extra_fields(pending: PendingReply) -> dict[str, Any] | None:
    """``hearth``: ``postprocess`` results and the ``turn_id`` they are kept under
    (``GET /v1/postprocess/{turn_id}``) when the message asked for post-processors,
    ``questions`` when the turn waits for an answer (the web page's buttons),
    ``files`` the turn's tools returned (links to ``GET /v1/files/{id}``)."""
    extra: dict[str, Any] = {}
    results = await pending.post_results(POST_RESULTS_WAIT_S)
    if results is not None:
        extra["postprocess"] = results
        if pending.turn_id is not None:
            extra["turn_id"] = pending.turn_id
    if pending.questions:
        extra["questions"] = list(pending.questions.values())
    if pending.files:
        extra["files"] = pending.files
    return extra or None


class HeldStream(StreamingResponse):
    """The SSE answer to one request: its hold on the pending reply ends with the
    response — streamed to the end, the client gone, or never started at all."""

    def __init__(self, body: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=SSE_HEADERS)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def _reply_or_gone(request: Request, pending: PendingReply, timeout_s: float) -> str:
    """The reply; a client that hung up first leaves it to become a notification."""
    reply = pending.ended  # shared with the requests that joined: not cancelled here
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait(
            {reply, gone}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        gone.cancel()
    if reply in done:
        try:
            return reply.result()
        except ReplyGoneError as exc:
            raise stopping(exc) from None
    if gone in done:
        raise ApiError(499, "the client closed the request")  # nobody reads it
    raise late(timeout_s)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _unsent(reply: str, streamed: str) -> str:
    """What the client has not seen of the recorded reply. It differs from the
    deltas when a hook rewrote the text or the turn failed after some output."""
    if reply.startswith(streamed):
        return reply[len(streamed) :]
    return f"\n\n{reply}" if streamed else reply


def late(timeout_s: float) -> ApiError:
    return ApiError(
        504,
        f"no reply within {timeout_s:g} s; the same request again waits for the turn "
        "still running, and the reply is kept at GET /v1/notifications",
        kind="server_error",
        code="timeout",
    )


def stopping(exc: ReplyGoneError) -> ApiError:
    return ApiError(503, str(exc), kind="server_error", code="unavailable")
