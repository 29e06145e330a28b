"""Sending and editing messages, with Telegram's error rules applied.

``RetryAfter`` is honoured (sleep as told, then retry); network errors and
timeouts are retried with exponential backoff; after ``max_attempts`` the
error is raised, so the bus retries the whole delivery later. Text is sent
as HTML rendered from the model's Markdown; when Telegram rejects it
(``BadRequest``), the same piece is sent again as plain text.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import warnings
from collections.abc import Awaitable, Callable
from typing import TypeVar

from telegram import Bot, InputFile, Message
from telegram.error import BadRequest, NetworkError, RetryAfter

from core.extensions.sdk import Backoff, split_text

from .markup import PARSE_MODE, to_html

T = TypeVar("T")

BACKOFF_MAX_S = 30.0
SEND_BACKOFF = Backoff(0.5, BACKOFF_MAX_S)
RETRY_AFTER_MAX_S = 600.0
CAPTION_MAX = 1024  # Telegram's longest caption
MAX_MESSAGE_UNITS = 4096  # Telegram's longest message, in UTF-16 units


def retry_after_seconds(exc: RetryAfter) -> float:
    """``exc.retry_after`` as seconds (an int or a timedelta depending on PTB settings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = exc.retry_after
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


def is_not_modified(exc: BadRequest) -> bool:
    return "not modified" in exc.message.lower()


class Sender:
    def __init__(self, bot: Bot, logger: logging.Logger, *, max_attempts: int = 6) -> None:
        self.bot = bot
        self._logger = logger
        self.max_attempts = max_attempts

    async def call(
        self, what: str, request: Callable[[], Awaitable[T]], *, attempts: int | None = None
    ) -> T:
        """Run one Bot API request, retrying what is worth retrying (``attempts`` times)."""
        max_attempts = attempts or self.max_attempts
        failures = SEND_BACKOFF.delays()
        attempt = 1
        while True:
            try:
                return await request()
            except RetryAfter as exc:
                if attempt >= max_attempts:
                    raise
                wait = retry_after_seconds(exc)
                self._logger.warning("%s: Telegram asks to wait %.1f s (flood control)", what, wait)
            except BadRequest:
                raise
            except NetworkError as exc:  # TimedOut included
                if attempt >= max_attempts:
                    raise
                wait = failures.next()
                self._logger.warning("%s failed (%s); retrying in %.1f s", what, exc, wait)
            attempt += 1
            await asyncio.sleep(wait)

    async def send_text(self, chat_id: int, text: str) -> list[int]:
        """Send ``text`` (split as needed); the ids of the messages sent."""
        return [
            await self.send_piece(chat_id, piece) for piece in split_text(text, MAX_MESSAGE_UNITS)
        ]

    async def send_piece(self, chat_id: int, piece: str, *, attempts: int | None = None) -> int:
        """Send one piece that already fits in a message."""

        def send(text: str, parse_mode: str | None) -> Callable[[], Awaitable[Message]]:
            return lambda: self.bot.send_message(chat_id, text, parse_mode=parse_mode)

        message = await self._with_fallback(
            f"sendMessage to {chat_id}",
            send(to_html(piece), PARSE_MODE),
            send(piece, None),
            attempts,
        )
        return message.message_id

    async def send_file(
        self, chat_id: int, name: str, data: bytes, caption: str, *, photo: bool
    ) -> int:
        """Send a file: ``sendPhoto`` for a picture, ``sendDocument`` for anything
        else, with its caption (cut to Telegram's 1024 characters)."""
        text = caption[:CAPTION_MAX] or None

        def send() -> Awaitable[Message]:
            if photo:
                return self.bot.send_photo(chat_id, InputFile(data, name), caption=text)
            return self.bot.send_document(chat_id, InputFile(data, name), caption=text)

        method = "sendPhoto" if photo else "sendDocument"
        message = await self.call(f"{method} to {chat_id}", send)
        return message.message_id

    async def edit_piece(
        self, chat_id: int, message_id: int, piece: str, *, attempts: int | None = None
    ) -> None:
        """Replace the text of a message; an unchanged text is not an error."""

        def edit(text: str, parse_mode: str | None) -> Callable[[], Awaitable[object]]:
            return lambda: self.bot.edit_message_text(
                text, chat_id=chat_id, message_id=message_id, parse_mode=parse_mode
            )

        try:
            await self._with_fallback(
                f"editMessageText {chat_id}/{message_id}",
                edit(to_html(piece), PARSE_MODE),
                edit(piece, None),
                attempts,
            )
        except BadRequest as exc:
            if not is_not_modified(exc):
                raise

    async def _with_fallback(
        self,
        what: str,
        rich: Callable[[], Awaitable[T]],
        plain: Callable[[], Awaitable[T]],
        attempts: int | None,
    ) -> T:
        try:
            return await self.call(what, rich, attempts=attempts)
        except BadRequest as exc:
            if is_not_modified(exc):
                raise
            self._logger.info("%s: markup rejected (%s); sending plain text", what, exc)
        return await self.call(what, plain, attempts=attempts)
