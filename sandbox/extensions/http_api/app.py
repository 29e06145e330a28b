"""The HTTP routes of the OpenAI-compatible API (``/v1/...``) on Starlette.

Handlers only parse, journal and wait: the turn runs in the kernel, which
answers the request's tagged address (``replies``). Every endpoint needs the
bearer token; every failure is an OpenAI error object (``openai_shape``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from .auth import TokenCheck
from .config import ApiConfig
from .limits import read_body
from .notifications import Notifications
from .openai_shape import (
    DONE_EVENT,
    MODEL_ID,
    ApiError,
    Ask,
    chat_usage,
    chunk_event,
    completion,
    error_event,
    model_object,
    parse_chat_request,
    post_processor_asks,
)
from .replies import PendingReply
from .responses import parse_responses_request, response_events, response_object
from .turns import SSE_HEADERS, Delta, Failed, HeldStream, streamed_reply, whole_reply

CONVERSATION_HEADER = "x-hearth-conversation"
MAX_NAME_CHARS = 200
KEEPALIVE_S = 15.0
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
    async def submit(self, ask: Ask) -> PendingReply: ...
    def release(self, pending: PendingReply) -> None: ...
    async def answered(self, pending: PendingReply, shown: str) -> None: ...
    async def post_results(self, turn_id: str) -> dict[str, Any] | None: ...


def build_app(backend: ApiBackend, extra: Sequence[BaseRoute] = ()) -> Starlette:
    api = _Api(backend)
    routes = [
        Route("/v1/chat/completions", api.chat_completions, methods=["POST"]),
        Route("/v1/responses", api.responses, methods=["POST"]),
        Route("/v1/models", api.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", api.model, methods=["GET"]),
        Route("/v1/notifications", api.notifications, methods=["GET"]),
        Route("/v1/postprocess/{turn_id:path}", api.postprocess, methods=["GET"]),
        *extra,
    ]
    return Starlette(
        routes=routes,
        exception_handlers={
            ApiError: _api_error,
            HTTPException: _http_error,
            Exception: _unexpected,
        },
    )


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    """Anything else still answers in the OpenAI shape: 413 when the event bus refused
    the message for its size (``events.max_payload_bytes`` set below the channel's
    ``max_message_bytes``), else 500 naming the error."""
    size, limit = getattr(exc, "size", None), getattr(exc, "limit", None)
    if isinstance(size, int) and isinstance(limit, int) and size > limit:
        error = ApiError(413, str(exc), code="message_too_large", param="messages")
    else:
        error = ApiError(500, f"{type(exc).__name__}: {exc}", kind="server_error")
    return await _api_error(request, error)


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
        chat = parse_chat_request(await self._body(request))
        ask = Ask(
            _optional_conversation(request, chat.user),
            chat.pairs(),
            chat.newest_user_text(),
            _header_value(request, "idempotency-key"),
            chat.stream,
            self.backend.tokens.caller(request),
            post_processor_asks(chat.extensions),
            chat.newest_user_uploads(),
        )
        pending = await self._submit(ask)
        ident = f"chatcmpl-{pending.tag}"
        if chat.stream:
            stream = _chat_stream(backend, pending, ident, chat.include_usage)
            return HeldStream(stream, lambda: backend.release(pending))
        reply, extra = await whole_reply(request, backend, pending)
        return JSONResponse(completion(ident, reply, extra, pending.usage))

    async def responses(self, request: Request) -> Response:
        """``POST /v1/responses`` (the Responses API) on the same turn path."""
        self._admit(request)
        backend = self.backend
        asked = parse_responses_request(await self._body(request))
        ask = Ask(
            _optional_conversation(request, asked.user),
            asked.pairs(),
            asked.newest_user_text(),
            _header_value(request, "idempotency-key"),
            asked.stream,
            self.backend.tokens.caller(request),
            post_processor_asks(asked.extensions),
            asked.newest_user_uploads(),
        )
        pending = await self._submit(ask)
        if asked.stream:
            stream = response_events(streamed_reply(backend, pending), pending.tag)
            return HeldStream(stream, lambda: backend.release(pending))
        reply, extra = await whole_reply(request, backend, pending)
        return JSONResponse(response_object(pending.tag, reply, pending.usage, extra))

    async def _body(self, request: Request) -> bytes:
        config = self.backend.config
        return await read_body(request, config.max_body_bytes, config.body_timeout_s, MAX_BODY_KEY)

    async def _submit(self, ask: Ask) -> PendingReply:
        backend = self.backend
        if backend.in_flight >= backend.config.max_inflight:
            raise ApiError(
                429,
                f"{backend.in_flight} requests are waiting for replies already; try again soon",
                kind="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            )
        return await backend.submit(ask)

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

    async def postprocess(self, request: Request) -> Response:
        """``GET /v1/postprocess/{turn_id}``: the post-processor results of one turn
        of this channel (its id is ``hearth.turn_id`` of the reply), kept across
        restarts."""
        self._admit(request)
        turn_id = request.path_params["turn_id"]
        found = await self.backend.post_results(turn_id)
        if found is None:
            raise ApiError(
                404,
                f"no post-processor results for turn {turn_id!r} (a turn of this API "
                "whose message asked for post-processors)",
                code="not_found",
                param="turn_id",
            )
        return JSONResponse(found)

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


async def _chat_stream(
    backend: ApiBackend, pending: PendingReply, ident: str, include_usage: bool
) -> AsyncIterator[str]:
    usage_field = {"usage": None} if include_usage else {}
    yield chunk_event(ident, {"role": "assistant", "content": ""}, **usage_field)
    async for piece in streamed_reply(backend, pending):
        if isinstance(piece, Delta):
            yield chunk_event(ident, {"content": piece.text}, **usage_field)
        elif isinstance(piece, Failed):
            yield error_event(piece.error)
        else:
            if piece.tail:
                yield chunk_event(ident, {"content": piece.tail}, **usage_field)
            yield chunk_event(ident, {}, "stop", piece.extra, **usage_field)
            if include_usage:
                yield chunk_event(ident, None, usage=chat_usage(piece.usage))
    yield DONE_EVENT


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


# ------------------------------------------------------------ request parts


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
