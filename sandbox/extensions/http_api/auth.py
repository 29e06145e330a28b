"""Who may call: the bearer token ``HEARTH_API_TOKEN``, or the web page's cookie.

Every comparison is constant-time. The page's login answers with a cookie
(``HttpOnly``, ``SameSite=Strict``) holding an expiry, a random session id and
an HMAC of both keyed by the token: it survives restarts and is void once the
token changes. Logging out ends the session on the server too: its id is kept
as revoked until the cookie would have expired, so a copy of the cookie stops
working with it (ADR 0047). A request that the cookie authenticates and that
changes something (any POST) must also carry ``X-CSRF-Token`` — an HMAC of the cookie
that only the page can read, from ``GET /web/session`` — and, when the
browser sends one, an ``Origin`` naming this very host.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from .openai_shape import ApiError

TOKEN_SECRET = "HEARTH_API_TOKEN"
COOKIE = "hearth_session"
CSRF_HEADER = "x-csrf-token"
SESSION_S = 7 * 86400
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# a client's own id: Hearth's header, and Open WebUI's (ENABLE_FORWARD_USER_INFO_HEADERS)
CLIENT_HEADERS = ("x-hearth-client", "x-openwebui-user-id")


class TokenCheck:
    def __init__(self, token: str, revoked: Iterable[str] = ()) -> None:
        self._token = token.encode()
        self._revoked = set(revoked)

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self._token)

    def require(self, request: Request) -> None:
        """Pass with the bearer token, or with the page's cookie (plus the CSRF token
        and a same-host ``Origin`` on a POST); else ``ApiError`` 401 or 403."""
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.matches(presented.strip()):
            return
        cookie = request.cookies.get(COOKIE)
        if cookie and self._valid_cookie(cookie):
            if request.method not in SAFE_METHODS:
                self._require_same_site(request, cookie)
            return
        raise ApiError(
            401,
            f"missing or wrong bearer token (Authorization: Bearer <{TOKEN_SECRET}>)",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )

    def caller(self, request: Request) -> str:
        """Who sends ``request`` (it passed ``require``), as far as the API can tell:
        the token or the page's session, and the client's id when it sends one
        (``CLIENT_HEADERS``). A chat and an idempotency key belong to their caller."""
        session = self.session_of(request)
        credential = f"web:{session[0]}" if session is not None else "token"
        clients = [request.headers.get(header, "") for header in CLIENT_HEADERS]
        return "\0".join([credential, *clients])

    # ------------------------------------------------------------ the page's session

    def log_in(self, response: Response) -> None:
        expires = int(time.time()) + SESSION_S
        session = secrets.token_urlsafe(16)
        value = f"{expires}.{session}.{self._sign(f'session:{expires}.{session}')}"
        response.set_cookie(
            COOKIE, value, max_age=SESSION_S, path="/", httponly=True, samesite="strict"
        )

    def session_of(self, request: Request) -> tuple[str, int] | None:
        """``(session id, expiry)`` of the request's valid cookie, else ``None``."""
        cookie = request.cookies.get(COOKIE)
        if not cookie or not self._valid_cookie(cookie):
            return None
        expires, session, _ = cookie.split(".")
        return session, int(expires)

    def revoke(self, session: str) -> None:
        """No cookie of ``session`` is accepted from now on (the caller keeps it stored)."""
        self._revoked.add(session)

    @staticmethod
    def log_out(response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")

    def csrf_token(self, request: Request) -> str | None:
        """The page's CSRF token for its valid cookie (``None`` without one)."""
        cookie = request.cookies.get(COOKIE)
        if not cookie or not self._valid_cookie(cookie):
            return None
        return self._sign(f"csrf:{cookie}")

    def _valid_cookie(self, cookie: str) -> bool:
        parts = cookie.split(".")
        if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) < time.time():
            return False
        expires, session, signature = parts
        if not hmac.compare_digest(signature, self._sign(f"session:{expires}.{session}")):
            return False
        return session not in self._revoked

    def _require_same_site(self, request: Request, cookie: str) -> None:
        presented = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(presented, self._sign(f"csrf:{cookie}")):
            raise ApiError(403, "missing or wrong X-CSRF-Token (reload the page)", code="csrf")
        require_same_origin(request)

    def _sign(self, text: str) -> str:
        return hmac.new(self._token, text.encode(), hashlib.sha256).hexdigest()


def require_same_origin(request: Request) -> None:
    """An ``Origin`` header, when sent, must name the host the request was sent to."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    if urlsplit(origin).netloc != request.headers.get("host", ""):
        raise ApiError(403, f"cross-origin request from {origin[:80]!r} refused", code="csrf")
