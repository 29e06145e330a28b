"""The web page: ``/`` (static HTML, CSS and a small script; no build step) and the
few JSON endpoints only it uses, under ``/web/`` (``/web/history``: the
page's conversation as it was shown, so a reload shows it again, with the
post-processor tags of its messages; ``/web/postprocessors``: the page's
activations and the processors' metadata, for ``#`` autocompletion, the input's
chips and the configuration panel, whose changes are ``/ext`` commands).

The page chats through ``/v1/chat/completions`` (streamed) and hears
notifications through ``/v1/notifications?stream=true``, authenticated by
its cookie (``auth``). Reminders and the memory count come from the commands
``/reminders``, ``/cancel ID`` and ``/memories``, sent like any chat message
as the page's conversation; the kernel's status and the requeue button use
the context (``kernel_status``, ``requeue_dead_letter``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .auth import TokenCheck, require_same_origin
from .config import ApiConfig
from .limits import LoginThrottle, read_body
from .openai_shape import ApiError

ASSETS = {
    "app.js": "text/javascript",
    "posts.js": "text/javascript",
    "attachments.js": "text/javascript",
    "style.css": "text/css",
}
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
MAX_LOGIN_BYTES = 4096  # {"token": ...}
MAX_REQUEUE_BYTES = 256  # {"event_id": N}


class WebBackend(Protocol):
    config: ApiConfig
    tokens: TokenCheck
    logins: LoginThrottle

    @property
    def in_flight(self) -> int: ...
    @property
    def listening(self) -> str: ...
    async def kernel_status(self) -> dict[str, Any]: ...
    async def requeue(self, event_id: int) -> int: ...
    async def end_session(self, session: str, expires_at: int) -> None: ...
    async def chat_history(self) -> list[dict[str, object]]: ...
    async def post_processors(self) -> dict[str, Any]: ...


def web_routes(backend: WebBackend, static_dir: Path) -> list[BaseRoute]:
    page = _Page(backend, static_dir)
    return [
        Route("/", page.index, methods=["GET"]),
        Route("/web/login", page.login, methods=["POST"]),
        Route("/web/logout", page.logout, methods=["POST"]),
        Route("/web/session", page.session, methods=["GET"]),
        Route("/web/status", page.status, methods=["GET"]),
        Route("/web/history", page.history, methods=["GET"]),
        Route("/web/postprocessors", page.post_processors, methods=["GET"]),
        Route("/web/requeue", page.requeue, methods=["POST"]),
        Route("/web/{name}", page.asset, methods=["GET"]),
    ]


class _Page:
    def __init__(self, backend: WebBackend, static_dir: Path) -> None:
        self.backend = backend
        self.files = {name: (static_dir / name).read_bytes() for name in ("index.html", *ASSETS)}

    async def index(self, request: Request) -> Response:
        return Response(self.files["index.html"], media_type="text/html", headers=PAGE_HEADERS)

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            raise ApiError(404, f"no such file: {request.url.path}")
        return Response(self.files[name], media_type=ASSETS[name], headers=PAGE_HEADERS)

    async def login(self, request: Request) -> Response:
        """``{"token": ...}`` → the session cookie (204), or 401; 429 while the client's
        address has sent too many wrong tokens."""
        require_same_origin(request)
        client = request.client.host if request.client is not None else "?"
        logins = self.backend.logins
        logins.check(client)  # before reading the body: a blocked client costs nothing
        body = await self._body(request, MAX_LOGIN_BYTES)
        try:
            token = json.loads(body).get("token", "")
        except (ValueError, AttributeError, RecursionError):
            raise ApiError(400, 'the body must be {"token": "..."}') from None
        logins.check(client)  # again: parallel attempts may have failed meanwhile
        if not isinstance(token, str) or not self.backend.tokens.matches(token):
            logins.failed(client)
            raise ApiError(401, "wrong token (HEARTH_API_TOKEN)", code="invalid_api_key")
        logins.succeeded(client)
        response = Response(status_code=204)
        self.backend.tokens.log_in(response)
        return response

    async def logout(self, request: Request) -> Response:
        """Ends the cookie's session on the server, then asks the browser to drop it."""
        self.backend.tokens.require(request)
        session = self.backend.tokens.session_of(request)
        if session is not None:
            await self.backend.end_session(*session)
        response = Response(status_code=204)
        self.backend.tokens.log_out(response)
        return response

    async def session(self, request: Request) -> Response:
        """The CSRF token and the page's conversation, for a valid cookie (else 401)."""
        csrf = self.backend.tokens.csrf_token(request)
        if csrf is None:
            raise ApiError(401, "not logged in", code="invalid_api_key")
        config = self.backend.config
        return JSONResponse({"csrf": csrf, "conversation": config.web_conversation})

    async def status(self, request: Request) -> Response:
        self.backend.tokens.require(request)
        kernel = await self.backend.kernel_status()
        api = {"listen": self.backend.listening, "in_flight": self.backend.in_flight}
        return JSONResponse({"kernel": kernel, "api": api})

    async def history(self, request: Request) -> Response:
        """The page's conversation as it was shown (a reload shows it again)."""
        self.backend.tokens.require(request)
        return JSONResponse({"messages": await self.backend.chat_history()})

    async def post_processors(self, request: Request) -> Response:
        """The page's post-processor activations and every available processor with
        its metadata: the ``#`` autocompletion and the configuration panel."""
        self.backend.tokens.require(request)
        return JSONResponse(await self.backend.post_processors())

    async def requeue(self, request: Request) -> Response:
        self.backend.tokens.require(request)
        try:
            event_id = json.loads(await self._body(request, MAX_REQUEUE_BYTES))["event_id"]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ApiError(400, 'the body must be {"event_id": N}') from None
        if not isinstance(event_id, int) or isinstance(event_id, bool):
            raise ApiError(400, "event_id must be a whole number", param="event_id")
        count = await self.backend.requeue(event_id)
        return JSONResponse({"event_id": event_id, "requeued": count})

    async def _body(self, request: Request, limit: int) -> bytes:
        return await read_body(
            request, limit, self.backend.config.body_timeout_s, f"the most {request.url.path} takes"
        )
