"""Showing a reply while it is generated: one Telegram message, edited at a bounded rate.

The rule (first shown after ``interval_s``, edits at most once per
``interval_s``, best-effort previews, the final text split past the limit) is
the extension library's ``EditedStream``; this gives it the Bot API calls.
Flood control (``RetryAfter``) postpones the next preview; a final edit
Telegram refuses is sent as a new message, unless the text was already shown
("message is not modified"). "Typing…" is a chat action, refreshed while tools
run.
"""

from __future__ import annotations

import logging

from telegram.constants import ChatAction
from telegram.error import BadRequest, RetryAfter, TelegramError

from core.extensions.sdk import EditedStream

from .chats import ChatTargets
from .sender import MAX_MESSAGE_UNITS, Sender, is_not_modified, retry_after_seconds

TYPING_REFRESH_S = 4.0


class StreamPresenter(EditedStream[int, int]):
    """Streams into a chat (by id), editing a message (by id)."""

    preview_errors = (TelegramError,)
    refused_edits = (BadRequest,)
    typing_refresh_s = TYPING_REFRESH_S

    def __init__(
        self, sender: Sender, chats: ChatTargets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        super().__init__(logger, limit=MAX_MESSAGE_UNITS, interval_s=interval_s)
        self._sender = sender
        self._chats = chats

    async def target(self, address: str) -> int:
        return self._chats.chat_for(address)

    async def send(self, where: int, text: str, *, preview: bool) -> int:
        return await self._sender.send_piece(where, text, attempts=1 if preview else None)

    async def edit(self, where: int, message: int, text: str, *, preview: bool) -> None:
        await self._sender.edit_piece(where, message, text, attempts=1 if preview else None)

    def retry_after(self, exc: Exception) -> float | None:
        return retry_after_seconds(exc) if isinstance(exc, RetryAfter) else None

    def unchanged(self, exc: Exception) -> bool:
        return isinstance(exc, BadRequest) and is_not_modified(exc)

    async def typing(self, where: int, on: bool) -> None:
        if on:
            await self._sender.bot.send_chat_action(where, ChatAction.TYPING)
