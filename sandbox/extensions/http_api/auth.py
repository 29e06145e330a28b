"""Who may call: the bearer token ``HEARTH_API_TOKEN``, compared in constant time."""

from __future__ import annotations

import hmac

from starlette.requests import Request

from .openai_shape import ApiError

TOKEN_SECRET = "HEARTH_API_TOKEN"


class TokenCheck:
    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self._token)

    def require(self, request: Request) -> None:
        """Pass, or ``ApiError`` 401 (the same answer for a missing and a wrong token)."""
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.matches(presented.strip()):
            return
        raise ApiError(
            401,
            f"missing or wrong bearer token (Authorization: Bearer <{TOKEN_SECRET}>)",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
