"""Sending and editing messages through discord.py, with Discord's limits applied.

Rate limits: discord.py's HTTP client keeps Discord's per-route buckets
(from the ``X-RateLimit-*`` headers it waits before a request would exceed
one) and, on a ``429``, sleeps ``retry_after`` and tries again (five tries
per request); ``max_ratelimit_timeout`` (``RATE_LIMIT_MAX_S``) turns a wait
longer than that into ``RateLimited``, which is raised so the kernel's bus
retries the whole delivery later instead of holding a conversation for
minutes. Server errors (5xx) are retried by discord.py too; network errors
here, with backoff, ``max_attempts`` times. A text longer than one message
is split (``split_text`` of the extension library, 2,000 characters). Discord renders the model's
Markdown itself, so text is sent as is; mentions in a reply never ping
anyone (``AllowedMentions.none()``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import discord

from core.extensions.sdk import Backoff, split_text

from .targets import Target

T = TypeVar("T")

RATE_LIMIT_MAX_S = 30.0  # the smallest value discord.py accepts
SEND_BACKOFF = Backoff(0.5, 30.0)
NO_PINGS = discord.AllowedMentions.none()
# Discord refuses a message over 2,000 characters (``50035 Invalid Form Body``)
MAX_MESSAGE_UNITS = 2000


class Sender:
    def __init__(
        self, client: discord.Client, logger: logging.Logger, *, max_attempts: int = 4
    ) -> None:
        self.client = client
        self._logger = logger
        self.max_attempts = max_attempts
        self._dm_channels: dict[int, int] = {}  # user id -> their DM channel's id

    async def call(
        self, what: str, request: Callable[[], Awaitable[T]], *, attempts: int | None = None
    ) -> T:
        """Run one request, retrying network failures (``attempts`` times)."""
        max_attempts = attempts or self.max_attempts
        failures = SEND_BACKOFF.delays()
        attempt = 1
        while True:
            try:
                return await request()
            except (aiohttp.ClientError, OSError, discord.DiscordServerError) as exc:
                if attempt >= max_attempts:
                    raise
                wait = failures.next()
                self._logger.warning("%s failed (%s); retrying in %.1f s", what, exc, wait)
            attempt += 1
            await asyncio.sleep(wait)

    async def channel_id(self, target: Target) -> int:
        """The Discord channel a target writes to: a DM is opened once per user
        (``POST /users/@me/channels``) and remembered."""
        if target.kind == "channel":
            return target.id
        known = self._dm_channels.get(target.id)
        if known is None:
            dm = await self.call(
                f"opening a DM with {target.id}",
                lambda: self.client.create_dm(discord.Object(target.id)),
            )
            known = self._dm_channels[target.id] = dm.id
        return known

    def remember_dm(self, user_id: int, channel_id: int) -> None:
        """A DM seen in an incoming message: no need to open it again."""
        self._dm_channels[user_id] = channel_id

    async def send_text(self, target: Target, text: str) -> list[int]:
        """Send ``text`` (split as needed); the ids of the messages sent."""
        channel_id = await self.channel_id(target)
        return [
            await self.send_piece(channel_id, piece)
            for piece in split_text(text, MAX_MESSAGE_UNITS)
        ]

    async def send_piece(
        self,
        channel_id: int,
        piece: str,
        *,
        view: discord.ui.View | None = None,
        attempts: int | None = None,
    ) -> int:
        """Send one piece that already fits in a message (with buttons: ``view``)."""
        channel = self.client.get_partial_messageable(channel_id)
        extra: dict[str, Any] = {"view": view} if view is not None else {}
        message = await self.call(
            f"sending to channel {channel_id}",
            lambda: channel.send(piece, allowed_mentions=NO_PINGS, **extra),
            attempts=attempts,
        )
        return message.id

    async def edit_piece(
        self,
        channel_id: int,
        message_id: int,
        piece: str,
        *,
        drop_buttons: bool = False,
        attempts: int | None = None,
    ) -> None:
        """Replace the text of a message (and remove its buttons when asked)."""
        message = self.client.get_partial_messageable(channel_id).get_partial_message(message_id)
        extra: dict[str, Any] = {"view": None} if drop_buttons else {}
        await self.call(
            f"editing message {channel_id}/{message_id}",
            lambda: message.edit(content=piece, allowed_mentions=NO_PINGS, **extra),
            attempts=attempts,
        )

    async def typing(self, channel_id: int) -> None:
        """The "typing…" indicator (best effort; callers catch errors)."""
        await self.client.http.send_typing(channel_id)
