"""What one client may cost the channel: request bodies and login attempts (ADR 0047).

Every endpoint that reads a body reads it through ``read_body``: the stream
is counted while it arrives and refused (413) the moment it passes the
endpoint's limit, so a large body never sits in memory, and one that
trickles in is cut off (408) after ``body_timeout_s``. ``LoginThrottle``
gives each client address a few free wrong tokens at ``POST /web/login``,
then answers 429 for a delay that doubles with every further wrong one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass

from starlette.requests import Request

from .openai_shape import ApiError

FREE_LOGIN_FAILURES = 5
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 900.0
REMEMBERED_CLIENTS = 4096  # the oldest address is forgotten past this (bounded memory)
# After a refused body the connection ends: else the server would go on reading (and
# dropping) the rest of it, as much as the client cares to send.
HANG_UP = {"Connection": "close"}


async def read_body(request: Request, limit: int, timeout_s: float, source: str) -> bytes:
    """The body, refused (413) as soon as it is known to pass ``limit`` bytes, or
    (408) when it has not all arrived within ``timeout_s``; ``source`` says where
    the limit comes from, for the error message."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, source)
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for part in request.stream():
                body += part
                if len(body) > limit:
                    raise _too_large(limit, source)
    except TimeoutError:
        raise ApiError(
            408,
            f"the body did not arrive within {timeout_s:g} s",
            code="request_timeout",
            headers=HANG_UP,
        ) from None
    return bytes(body)


def _too_large(limit: int, source: str) -> ApiError:
    return ApiError(413, f"the body is larger than {limit} bytes ({source})", headers=HANG_UP)


@dataclass(slots=True)
class _Record:
    failures: int = 0
    blocked_until: float = 0.0


class LoginThrottle:
    """Wrong login tokens per client address: after ``FREE_LOGIN_FAILURES`` of them
    each further one blocks the address for twice as long as the one before
    (``FIRST_DELAY_S`` up to ``MAX_DELAY_S``); a right token clears it. Blocked
    attempts are refused before the token is even compared."""

    def __init__(self) -> None:
        self._clients: OrderedDict[str, _Record] = OrderedDict()

    def check(self, client: str) -> None:
        """Raise 429 (with ``Retry-After``) while ``client`` is blocked."""
        record = self._clients.get(client)
        wait = 0.0 if record is None else record.blocked_until - time.monotonic()
        if wait > 0:
            raise ApiError(
                429,
                f"too many wrong tokens from {client}; try again in {wait:.0f} s",
                kind="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(max(1, round(wait)))},
            )

    def failed(self, client: str) -> None:
        record = self._clients.pop(client, None) or _Record()
        self._clients[client] = record  # newest last: the oldest is forgotten first
        while len(self._clients) > REMEMBERED_CLIENTS:
            self._clients.popitem(last=False)
        record.failures += 1
        extra = record.failures - FREE_LOGIN_FAILURES
        if extra > 0:
            delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** min(extra - 1, 20))
            record.blocked_until = time.monotonic() + delay

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)
