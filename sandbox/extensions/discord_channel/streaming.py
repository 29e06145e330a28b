"""Showing a reply while it is generated: one Discord message, edited at a bounded rate.

The rule (first shown after ``interval_s``, edits at most once per
``interval_s``, best-effort previews, the final text split past 2,000
characters) is the extension library's ``EditedStream``; this gives it the
REST calls. A ``RateLimited`` postpones the next preview until its
``retry_after``. "Typing…" is shown at the start and refreshed while tools run.
"""

from __future__ import annotations

import logging

import discord

from core.extensions.sdk import EditedStream

from .sender import MAX_MESSAGE_UNITS, Sender
from .targets import Targets

TYPING_REFRESH_S = 8.0  # Discord shows "typing…" for about 10 s


class StreamPresenter(EditedStream[int, int]):
    """Streams into a Discord channel or DM (by channel id), editing a message (by id)."""

    target_errors = (ValueError, discord.DiscordException)
    preview_errors = (discord.DiscordException, OSError)
    typing_refresh_s = TYPING_REFRESH_S

    def __init__(
        self, sender: Sender, targets: Targets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        super().__init__(logger, limit=MAX_MESSAGE_UNITS, interval_s=interval_s)
        self._sender = sender
        self._targets = targets

    async def target(self, address: str) -> int:
        return await self._sender.channel_id(self._targets.target(address))

    async def send(self, where: int, text: str, *, preview: bool) -> int:
        return await self._sender.send_piece(where, text, attempts=1 if preview else None)

    async def edit(self, where: int, message: int, text: str, *, preview: bool) -> None:
        await self._sender.edit_piece(where, message, text, attempts=1 if preview else None)

    def retry_after(self, exc: Exception) -> float | None:
        return exc.retry_after if isinstance(exc, discord.RateLimited) else None

    async def typing(self, where: int, on: bool) -> None:
        if on:
            await self._sender.typing(where)
