"""Live checks the setup wizard makes before it writes anything.

``list_models`` asks a provider ``GET /models`` (the OpenAI API, Ollama,
llama.cpp and LM Studio all answer it); ``TelegramProbe`` checks a bot token
with ``getMe`` and collects who wrote to the bot (``getUpdates``), so the
allow-list can be filled with ids the user never has to look up. Neither
logs a key or a token; errors name the address, never the secret.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from core.runtime.errors import HearthError

__all__ = [
    "DEFAULT_TELEGRAM_BASE_URL",
    "ProbeError",
    "TelegramProbe",
    "TelegramSender",
    "list_models",
]

DEFAULT_TELEGRAM_BASE_URL = "https://api.telegram.org/bot"
PROBE_TIMEOUT_S = 10.0


class ProbeError(HearthError):
    """A provider or the Bot API did not answer as expected; the message says where."""


async def list_models(base_url: str | None, api_key: str) -> list[str]:
    """The model ids a provider offers (``base_url`` ``None``: OpenAI's API)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=PROBE_TIMEOUT_S)
    where = base_url or "https://api.openai.com/v1"
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S + 1):
            page = await client.models.list()
    except TimeoutError:
        raise ProbeError(f"no answer from {where} in {PROBE_TIMEOUT_S:g} s") from None
    except Exception as exc:
        raise ProbeError(f"{where}: {_one_line(exc)}") from None
    finally:
        await client.close()
    return sorted(model.id for model in page.data)


@dataclass(frozen=True, slots=True)
class TelegramSender:
    """Someone who wrote to the bot: whom to offer for the allow-list."""

    user_id: int
    name: str
    username: str | None

    def describe(self) -> str:
        handle = f" (@{self.username})" if self.username else ""
        return f"{self.name}{handle}, id {self.user_id}"


class TelegramProbe:
    """The Bot API seen with one token (``base_url`` verbatim, the token appended)."""

    def __init__(self, token: str, base_url: str | None = None) -> None:
        from telegram import Bot

        self._bot = Bot(token, base_url=base_url or DEFAULT_TELEGRAM_BASE_URL)
        self._offset: int | None = None

    async def bot_username(self) -> str:
        """``getMe``: the bot's username; ``ProbeError`` when the token is refused."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                me = await self._bot.get_me()
        except TimeoutError:
            raise ProbeError("the Telegram Bot API did not answer getMe in time") from None
        except Exception as exc:
            raise ProbeError(f"Telegram refused the token (getMe): {_one_line(exc)}") from None
        return str(me.username)

    async def senders(self, wait_s: float) -> list[TelegramSender]:
        """Private-chat senders of updates that arrive within ``wait_s`` (long poll);
        updates are acknowledged, so the bot does not answer them later."""
        try:
            updates = await self._bot.get_updates(
                offset=self._offset, timeout=int(wait_s), allowed_updates=["message"]
            )
        except Exception as exc:
            raise ProbeError(f"getUpdates failed: {_one_line(exc)}") from None
        found: dict[int, TelegramSender] = {}
        for update in updates:
            self._offset = update.update_id + 1
            user = update.effective_user
            if user is None or user.is_bot:
                continue
            found[user.id] = TelegramSender(user.id, user.full_name, user.username)
        return list(found.values())

    async def acknowledge(self) -> None:
        """Confirm the updates read so far (the next poll's ``offset`` does that)."""
        if self._offset is not None:
            try:
                await self._bot.get_updates(offset=self._offset, timeout=0)
            except Exception as exc:
                raise ProbeError(f"getUpdates failed: {_one_line(exc)}") from None

    async def aclose(self) -> None:
        await self._bot.shutdown()

    async def __aenter__(self) -> TelegramProbe:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
