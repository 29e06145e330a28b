"""Showing a reply while it is generated: one Slack message, edited at a bounded rate.

The rule (first shown after ``interval_s``, ``chat.update`` at most once per
``interval_s``, best-effort previews, the final text split past the limit) is
the extension library's ``EditedStream``; this gives it the Web API calls.
Previews go through the client without retries (one attempt; a ``429``
postpones the next preview by its ``Retry-After``); the final text goes
through the retrying client. Slack has no typing indicator for bots outside
assistant threads, so none is shown.
"""

from __future__ import annotations

import logging

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError

from core.extensions.sdk import EditedStream

from .sender import MAX_MESSAGE_CHARS, Sender, retry_after_s
from .targets import Target, Targets

Posted = tuple[str, str]
"""A message the bot posted: ``(channel id, ts)``."""


class StreamPresenter(EditedStream[Target, Posted]):
    """Streams into a DM, channel or thread, editing a message by ``(channel, ts)``."""

    preview_errors = (SlackApiError, ClientError, OSError, TimeoutError)

    def __init__(
        self, sender: Sender, targets: Targets, logger: logging.Logger, *, interval_s: float
    ) -> None:
        super().__init__(logger, limit=MAX_MESSAGE_CHARS, interval_s=interval_s)
        self._sender = sender
        self._targets = targets

    async def target(self, address: str) -> Target:
        return self._targets.target(address)

    async def send(self, where: Target, text: str, *, preview: bool) -> Posted:
        return await self._sender.post(where, text, preview=preview)

    async def edit(self, where: Target, message: Posted, text: str, *, preview: bool) -> None:
        channel, ts = message
        await self._sender.update(channel, ts, text, preview=preview)

    def retry_after(self, exc: Exception) -> float | None:
        return retry_after_s(exc) if isinstance(exc, SlackApiError) else None
