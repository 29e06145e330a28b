"""Long polling with acknowledgement after journaling.

Telegram re-sends every update until a ``getUpdates`` call passes an offset
past it. This loop hands each update to ``handle`` (which returns once the
message is journaled) and only then asks for more with the new offset, so a
crash at any point loses nothing; the journal's idempotency key makes the
re-sent copy harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter

from core.extensions.sdk import Backoff

from .sender import BACKOFF_MAX_S, retry_after_seconds

ALLOWED_UPDATES = ("message", "callback_query")  # callback queries: button presses
POLL_BACKOFF = Backoff(1.0, BACKOFF_MAX_S)


class Poller:
    def __init__(
        self,
        bot: Bot,
        handle: Callable[[Update], Awaitable[None]],
        logger: logging.Logger,
        *,
        timeout_s: int,
        before_poll: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._logger = logger
        self.timeout_s = timeout_s
        self._before_poll = before_poll
        self.offset: int | None = None

    async def run(self) -> None:
        """Poll until cancelled. ``InvalidToken`` is raised (nothing to retry)."""
        failures = POLL_BACKOFF.delays()
        while True:
            if self._before_poll is not None:
                await self._before_poll()
            try:
                updates = await self._bot.get_updates(
                    offset=self.offset, timeout=self.timeout_s, allowed_updates=ALLOWED_UPDATES
                )
            except InvalidToken:
                raise
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                self._logger.warning("getUpdates: Telegram asks to wait %.1f s", wait)
                await asyncio.sleep(wait)
                continue
            except Conflict as exc:
                self._logger.error(
                    "getUpdates conflict (%s): another process polls with this token, "
                    "or a webhook is set (remove it with deleteWebhook)",
                    exc,
                )
                await asyncio.sleep(failures.next())
                continue
            except NetworkError as exc:  # TimedOut and server errors included
                delay = failures.next()
                self._logger.warning("getUpdates failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = POLL_BACKOFF.delays()
            for update in updates:
                await self._handle(update)
                self.offset = update.update_id + 1
