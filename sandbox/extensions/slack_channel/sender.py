"""Posting and editing messages through Slack's Web API.

Two clients share the bot token. ``client`` carries slack_sdk's retry
handlers: a ``429`` is retried after its ``Retry-After`` (Slack's rate
limits, tier by method), a connection error or a 5xx a few times; after
that the ``SlackApiError`` is raised, so the kernel's outbox retries the
whole delivery later (ADR 0014). ``preview`` has none: a streaming preview
is best-effort, and a ``429`` there postpones the next one instead of
holding the turn. A DM is reached through ``conversations.open`` (a user's
DM channel id, cached). Text is sent as mrkdwn rendered from the model's
Markdown, split into pieces that fit a message.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from core.extensions.sdk import split_text

from .markup import to_mrkdwn
from .targets import Target

RETRY_AFTER_MAX_S = 600.0
# Slack shows a longer message cut behind "Show more" and advises 4,000; the formatting
# added to a piece still fits
MAX_MESSAGE_CHARS = 3900


def retry_after_s(exc: SlackApiError) -> float | None:
    """The ``Retry-After`` of a rate-limited call (``None`` for other errors)."""
    response = exc.response
    if response is None or response.status_code != 429:
        return None
    headers = {k.lower(): v for k, v in (response.headers or {}).items()}
    value = headers.get("retry-after", "1")
    value = value[0] if isinstance(value, list) else value
    try:
        return min(max(float(value), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:
        return 1.0


def error_code(exc: SlackApiError) -> str:
    """Slack's ``error`` string of a failed call (``invalid_auth``, ``ratelimited`` ...)."""
    data: Any = exc.response.data if exc.response is not None else None
    return str(data.get("error", "")) if isinstance(data, dict) else ""


class Sender:
    """Posts and edits through the Web API: what must arrive, and previews."""

    def __init__(
        self, client: AsyncWebClient, preview: AsyncWebClient, logger: logging.Logger
    ) -> None:
        self.client = client
        self.preview = preview
        self._log = logger
        self._dms: dict[str, str] = {}  # user id -> DM channel id

    async def channel_of(self, target: Target) -> str:
        """The channel id to post to (a user's DM opened once, then cached)."""
        if target.channel is not None:
            return target.channel
        assert target.user is not None
        channel = self._dms.get(target.user)
        if channel is None:
            response = await self.client.conversations_open(users=target.user)
            channel = self._dms[target.user] = str(response["channel"]["id"])
        return channel

    def remember_dm(self, user: str, channel: str) -> None:
        """A DM channel seen in an event: no ``conversations.open`` needed for it."""
        self._dms.setdefault(user, channel)

    async def send_text(self, target: Target, text: str) -> list[str]:
        """Post ``text`` (split as needed); the ``ts`` of each message posted."""
        return [
            (await self.post(target, piece))[1] for piece in split_text(text, MAX_MESSAGE_CHARS)
        ]

    async def post(
        self,
        target: Target,
        piece: str,
        *,
        blocks: list[dict[str, Any]] | None = None,
        preview: bool = False,
        markup: bool = True,
    ) -> tuple[str, str]:
        """Post one piece that fits a message; ``(channel id, ts)``."""
        channel = await self.channel_of(target)
        client = self.preview if preview else self.client
        arguments: dict[str, Any] = {
            "channel": channel,
            "text": to_mrkdwn(piece) if markup else piece,
            "unfurl_links": False,
        }
        if target.thread_ts:
            arguments["thread_ts"] = target.thread_ts
        if blocks is not None:
            arguments["blocks"] = blocks
        response = await client.chat_postMessage(**arguments)
        return channel, str(response["ts"])

    async def update(
        self,
        channel: str,
        ts: str,
        piece: str,
        *,
        blocks: list[dict[str, Any]] | None = None,
        preview: bool = False,
        markup: bool = True,
    ) -> None:
        """Replace the text (and blocks, when given) of a message the bot posted."""
        client = self.preview if preview else self.client
        arguments: dict[str, Any] = {
            "channel": channel,
            "ts": ts,
            "text": to_mrkdwn(piece) if markup else piece,
        }
        if blocks is not None:
            arguments["blocks"] = blocks
        await client.chat_update(**arguments)
