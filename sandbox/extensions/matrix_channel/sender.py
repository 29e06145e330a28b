"""Sending and editing messages, with the homeserver's rate limits honoured.

Every call goes through ``Sender.call``: ``M_LIMIT_EXCEEDED`` (HTTP 429) is
honoured by sleeping ``retry_after_ms`` as told, then retrying; network
errors and timeouts are retried with exponential backoff; after
``max_attempts`` the error is raised, so the bus retries the whole delivery
later. nio's own 429 and timeout loops are switched off (``max_limit_exceeded
= 0``, ``max_timeouts = 0``) so these rules are the only ones. Text is sent
as plain ``m.text`` (the body is what every client shows); a reply too long
for one event is split at paragraph or line ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from nio import AsyncClient, ErrorResponse, RoomSendResponse

from core.extensions.sdk import Backoff, split_text

BACKOFF_MAX_S = 30.0
SEND_BACKOFF = Backoff(0.5, BACKOFF_MAX_S)
RETRY_AFTER_MAX_S = 600.0
MAX_BODY_CHARS = 16_000  # well under the 65,536-byte event limit, in any script
LIMITED = "M_LIMIT_EXCEEDED"


class MatrixSendError(RuntimeError):
    """The homeserver refused a request (the message names the call and the error)."""

    def __init__(self, what: str, response: ErrorResponse) -> None:
        super().__init__(f"{what}: {response.status_code or ''} {response.message}".strip())
        self.status_code = response.status_code
        self.retry_after_s = retry_after_seconds(response)


def retry_after_seconds(response: ErrorResponse) -> float:
    """``retry_after_ms`` as seconds, bounded (a limit without one waits 5 s)."""
    millis = response.retry_after_ms if response.retry_after_ms is not None else 5000
    return min(max(millis / 1000, 0.0), RETRY_AFTER_MAX_S)


def is_limited(response: object) -> bool:
    return isinstance(response, ErrorResponse) and response.status_code in (LIMITED, 429, "429")


def text_content(body: str) -> dict[str, Any]:
    return {"msgtype": "m.text", "body": body}


def edit_content(event_id: str, body: str) -> dict[str, Any]:
    """An ``m.replace`` edit of ``event_id``: clients show ``body`` in its place."""
    return {
        "msgtype": "m.text",
        "body": f"* {body}",
        "m.new_content": text_content(body),
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


class Sender:
    def __init__(
        self, client: AsyncClient, logger: logging.Logger, *, max_attempts: int = 6
    ) -> None:
        self.client = client
        self._logger = logger
        self.max_attempts = max_attempts

    async def call(
        self, what: str, request: Callable[[], Awaitable[Any]], *, attempts: int | None = None
    ) -> Any:
        """Run one client-server API request, retrying what is worth retrying."""
        max_attempts = attempts or self.max_attempts
        failures = SEND_BACKOFF.delays()
        attempt = 1
        while True:
            try:
                response = await request()
            except (aiohttp.ClientError, TimeoutError) as exc:
                if attempt >= max_attempts:
                    raise
                wait = failures.next()
                self._logger.warning("%s failed (%s); retrying in %.1f s", what, exc, wait)
            else:
                if not isinstance(response, ErrorResponse):
                    return response
                if not is_limited(response) or attempt >= max_attempts:
                    raise MatrixSendError(what, response)
                wait = retry_after_seconds(response)
                self._logger.warning(
                    "%s: the homeserver asks to wait %.1f s (M_LIMIT_EXCEEDED)", what, wait
                )
            attempt += 1
            await asyncio.sleep(wait)

    async def send_text(self, room_id: str, text: str) -> list[str]:
        """Send ``text`` (split as needed); the event ids of the messages sent."""
        return [await self.send_piece(room_id, piece) for piece in split_text(text, MAX_BODY_CHARS)]

    async def send_piece(self, room_id: str, piece: str, *, attempts: int | None = None) -> str:
        """Send one piece that already fits in an event; its event id."""
        return await self.send_content(room_id, text_content(piece), attempts=attempts)

    async def edit_piece(
        self, room_id: str, event_id: str, piece: str, *, attempts: int | None = None
    ) -> str:
        """Replace the text of a message (``m.replace``)."""
        return await self.send_content(room_id, edit_content(event_id, piece), attempts=attempts)

    async def send_content(
        self, room_id: str, content: dict[str, Any], *, attempts: int | None = None
    ) -> str:
        response = await self.call(
            f"sending to {room_id}",
            lambda: self.client.room_send(room_id, "m.room.message", content),
            attempts=attempts,
        )
        assert isinstance(response, RoomSendResponse)
        return str(response.event_id)

    async def redact(self, room_id: str, event_id: str, reason: str) -> None:
        await self.call(
            f"redacting {event_id}", lambda: self.client.room_redact(room_id, event_id, reason)
        )
