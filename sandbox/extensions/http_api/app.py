"""The HTTP routes of the OpenAI-compatible API (``/v1/...``) on Starlette.

Handlers only parse, journal and wait: the turn runs in the kernel, which
answers the request's tagged address (``replies``). Every endpoint needs the
bearer token; every failure is an OpenAI error object (``openai_shape``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from .auth import TokenCheck
from .config import ApiConfig
from .limits import read_body
from .notifications import Notifications
from .openai_shape import (
    DONE_EVENT,
    MODEL_ID,
    ApiError,
    chunk_event,
    completion,
    error_event,
    model_object,
    parse_chat_request,
)
from .replies import PendingReply, ReplyGoneError

CONVERSATION_HEADER = "x-hearth-conversation"
MAX_NAME_CHARS = 200
KEEPALIVE_S = 15.0
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
POST_RESULTS_WAIT_S = 5.0  # journaled before the reply: normally already there
MAX_BODY_KEY = "extensions.http_api.max_body_bytes"


class ApiBackend(Protocol):
    """What the routes need from the channel."""

    config: ApiConfig
    tokens: TokenCheck
    notifications: Notifications
    created: int

    @property
    def ready(self) -> bool: ...
    @property
    def in_flight(self) -> int: ...
    async def submit(
        self, conversation: str, text: str, idempotency_key: str | None
    ) -> PendingReply: ...
    def release(self, pending: PendingReply) -> None: ...


def build_app(backend: ApiBackend, extra: Sequence[BaseRoute] = ()) -> Starlette:
    api = _Api(backend)
    routes = [
        Route("/v1/chat/completions", api.chat_completions, methods=["POST"]),
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", api.model, methods=["GET"]),
        Route("/v1/notifications", api.notifications, methods=["GET"]),
        *extra,
    ]
    return Starlette(
        routes=routes,
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    what = "no such endpoint" if exc.status_code == 404 else str(exc.detail)
    error = ApiError(exc.status_code, f"{what}: {request.method} {request.url.path}")
    return await _api_error(request, error)


class _Api:
    def __init__(self, backend: ApiBackend) -> None:
        self.backend = backend

    def _admit(self, request: Request) -> None:
        self.backend.tokens.require(request)
        if not self.backend.ready:
            raise ApiError(
                503,
                "Hearth is starting or stopping; try again in a moment",
                kind="server_error",
                code="unavailable",
                headers={"Retry-After": "1"},
            )

    async def chat_completions(self, request: Request) -> Response:
        self._admit(request)
        backend = self.backend
        body = await read_body(
            request, backend.config.max_body_bytes, backend.config.body_timeout_s, MAX_BODY_KEY
        )
        chat = parse_chat_request(body)
        conversation = conversation_of(request, chat.user, backend.config.default_conversation)
        text = chat.newest_user_text()
        key = _header_value(request, "idempotency-key")
        if backend.in_flight >= backend.config.max_inflight:
            raise ApiError(
                429,
                f"{backend.in_flight} requests are waiting for replies already; try again soon",
                kind="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            )
        pending = await backend.submit(conversation, text, key)
        ident = f"chatcmpl-{pending.tag}"
        if chat.stream:
            stream = _stream_reply(pending, ident, backend.config.reply_timeout_s)
            return _HeldStream(stream, lambda: backend.release(pending))
        try:
            reply = await _reply_or_gone(request, pending, backend.config.reply_timeout_s)
            extra = await _post_results(pending)
        finally:
            backend.release(pending)
        return JSONResponse(completion(ident, reply, extra))

    async def models(self, request: Request) -> Response:
        self._admit(request)
        return JSONResponse({"object": "list", "data": [model_object(self.backend.created)]})

    async def model(self, request: Request) -> Response:
        self._admit(request)
        if request.path_params["model_id"] != MODEL_ID:
            raise ApiError(
                404,
                f"no model {request.path_params['model_id']!r}; Hearth is {MODEL_ID!r}",
                code="model_not_found",
            )
        return JSONResponse(model_object(self.backend.created))

    async def notifications(self, request: Request) -> Response:
        """Proactive messages after ``?after=ID``, for ``?user=`` or the conversation
        header (else all); ``?stream=true`` keeps the answer open as SSE."""
        self._admit(request)
        after = _int_param(request, "after", request.headers.get("last-event-id", "0"))
        conversation = _optional_conversation(request)
        notes = self.backend.notifications
        if request.query_params.get("stream", "").lower() in ("1", "true", "yes"):
            stream = _stream_notifications(notes, after, conversation)
            return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)
        found = await notes.after(after, conversation)
        last = found[-1].id if found else after
        data = [n.to_json() for n in found]
        return JSONResponse({"object": "list", "data": data, "last_id": last})


# ------------------------------------------------------------ replies


async def _reply_or_gone(request: Request, pending: PendingReply, timeout_s: float) -> str:
    """The reply; a client that hung up first leaves it to become a notification."""
    reply = asyncio.ensure_future(pending.result())
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
            raise _stopping(exc) from None
    reply.cancel()
    if gone in done:
        raise ApiError(499, "the client closed the request")  # nobody reads it
    raise _late(timeout_s)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class _HeldStream(StreamingResponse):
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


async def _stream_reply(pending: PendingReply, ident: str, timeout_s: float) -> AsyncIterator[str]:
    yield chunk_event(ident, {"role": "assistant", "content": ""})
    streamed: list[str] = []
    try:
        async with asyncio.timeout(timeout_s):
            async for piece in pending.chunks():
                streamed.append(piece)
                yield chunk_event(ident, {"content": piece})
            reply = await pending.result()
    except TimeoutError:
        yield error_event(_late(timeout_s))
        yield DONE_EVENT
        return
    except ReplyGoneError as exc:
        yield error_event(_stopping(exc))
        yield DONE_EVENT
        return
    tail = _unsent(reply, "".join(streamed))
    if tail:
        yield chunk_event(ident, {"content": tail})
    yield chunk_event(ident, {}, "stop", await _post_results(pending))
    yield DONE_EVENT


async def _post_results(pending: PendingReply) -> dict[str, Any] | None:
    """``{"postprocess": {name: result}}`` when the message asked for post-processors."""
    results = await pending.post_results(POST_RESULTS_WAIT_S)
    return {"postprocess": results} if results is not None else None


def _unsent(reply: str, streamed: str) -> str:
    """What the client has not seen of the recorded reply. It differs from the
    deltas when a hook rewrote the text or the turn failed after some output."""
    if reply.startswith(streamed):
        return reply[len(streamed) :]
    return f"\n\n{reply}" if streamed else reply


async def _stream_notifications(
    notes: Notifications, after: int, conversation: str | None
) -> AsyncIterator[str]:
    last = after
    while not notes.closed:
        found = await notes.wait_after(last, conversation, KEEPALIVE_S)
        if not found:
            yield ": keep-alive\n\n"
        for note in found:
            last = note.id
            yield f"id: {note.id}\ndata: {json.dumps(note.to_json())}\n\n"


def _late(timeout_s: float) -> ApiError:
    return ApiError(
        504,
        f"no reply within {timeout_s:g} s; it will be kept at GET /v1/notifications",
        kind="server_error",
        code="timeout",
    )


def _stopping(exc: ReplyGoneError) -> ApiError:
    return ApiError(503, str(exc), kind="server_error", code="unavailable")


# ------------------------------------------------------------ request parts


def conversation_of(request: Request, user: str | None, default: str) -> str:
    """``X-Hearth-Conversation``, else the request's ``user``, else ``default``."""
    return _optional_conversation(request, user) or default


def _optional_conversation(request: Request, user: str | None = None) -> str | None:
    name = request.headers.get(CONVERSATION_HEADER) or user or request.query_params.get("user")
    if name is None:
        return None
    if not 0 < len(name) <= MAX_NAME_CHARS or not name.isprintable():
        raise ApiError(
            400,
            f"the conversation (user / X-Hearth-Conversation) must be 1-{MAX_NAME_CHARS} "
            "printable characters",
            param="user",
        )
    return name


def _header_value(request: Request, header: str) -> str | None:
    value = request.headers.get(header)
    if value is not None and not (0 < len(value) <= MAX_NAME_CHARS and value.isprintable()):
        raise ApiError(400, f"{header} must be 1-{MAX_NAME_CHARS} printable characters")
    return value


def _int_param(request: Request, name: str, default: str) -> int:
    value = request.query_params.get(name, default)
    if not value.isdigit():
        raise ApiError(400, f"{name} must be a whole number, got {value!r}", param=name)
    return int(value)
