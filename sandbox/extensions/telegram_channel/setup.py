"""The channel's own setup (a ``SetupProvider``): bot token, then the allow-list.

``main.py setup`` loads the extension without its token and walks these
questions; the schema grows with the answers (ADR 0053). The token is
checked with ``getMe`` before it is taken — a refused one is asked again.
With a working bot the user may have someone send ``/start`` to it: the
senders of the next ``DISCOVERY_S`` seconds (``getUpdates``, acknowledged so
the running channel never answers them) are offered one by one, so nobody
looks up a numeric id. The last question shows the resulting
``allowed_user_ids``; the wizard keeps that answer in the local settings
layer and the token in ``.env``. A channel that is already running has
nothing to ask: ``/pair`` admits people there, and another poller would
take its updates.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import yaml
from telegram import Bot

from core.extensions.sdk import AllowListQuestions, one_line, running_note, secret_field

SETUP_TIMEOUT_S = 10.0
DISCOVERY_S = 60.0
POLL_S = 10  # one getUpdates long poll while discovering


@dataclass(frozen=True, slots=True)
class Sender:
    """Someone who wrote to the bot: whom to offer for the allow-list."""

    user_id: int
    name: str
    username: str | None

    def describe(self) -> str:
        handle = f" (@{self.username})" if self.username else ""
        return f"{self.name}{handle}, id {self.user_id}"


class TelegramSetup:
    """The answers so far, and what they lead to ask next."""

    def __init__(
        self, token_secret: str, token_now: str | None, base_url: str, allowed: list[int]
    ) -> None:
        self._secret = token_secret
        self._token_now = token_now
        self._base_url = base_url
        self._people = AllowListQuestions(allowed, _id_list, "Telegram user ids to serve (a list)")
        self._bot: Bot | None = None
        self._bot_name: str | None = None
        self._offset: int | None = None

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        token = secret_field(self._secret, "Bot token from @BotFather", self._token_now)
        if self._bot_name is None:
            return [token]
        discover = (
            f"Add someone to the allow-list? Send /start to @{self._bot_name} from "
            f"their account, then answer yes (waits up to {DISCOVERY_S:g} s)"
        )
        return [token, *self._people.fields(discover)]

    async def apply(self, name: str, value: str) -> None:
        """Take one answer; ``ValueError`` refuses it (it is asked again)."""
        if name == self._secret:
            await self._check_token(value.strip())
        elif not await self._people.apply(name, value, self._discover):
            raise ValueError(f"unknown setup field {name!r}")

    async def complete(self, running: bool, running_as: str | None) -> tuple[bool, str]:
        if running:
            return running_note(f"the bot @{running_as}" if running_as else None)
        await self.aclose()
        if self._bot_name is None:
            return False, "no working bot token: Telegram stays off"
        return True, self._people.serves(f"the bot @{self._bot_name}")

    async def aclose(self) -> None:
        if self._bot is not None:
            bot, self._bot = self._bot, None
            await bot.shutdown()

    async def _check_token(self, token: str) -> None:
        await self.aclose()
        self._bot_name = None
        bot = Bot(token, base_url=self._base_url)
        try:
            async with asyncio.timeout(SETUP_TIMEOUT_S):
                me = await bot.get_me()
        except TimeoutError:
            await bot.shutdown()
            raise ValueError("the Telegram Bot API did not answer getMe in time") from None
        except Exception as exc:
            await bot.shutdown()
            raise ValueError(f"Telegram refused the token (getMe): {one_line(exc)}") from None
        self._bot, self._bot_name = bot, str(me.username)

    async def _discover(self) -> None:
        """Who writes to the bot within ``DISCOVERY_S`` (private chats, not bots,
        not allowed already); their updates are acknowledged."""
        assert self._bot is not None, "the token is checked first"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DISCOVERY_S
        found: dict[int, Sender] = {}
        try:
            while not found and (left := deadline - loop.time()) > 0:
                updates = await self._bot.get_updates(
                    offset=self._offset, timeout=int(min(POLL_S, left)), allowed_updates=["message"]
                )
                for update in updates:
                    self._offset = update.update_id + 1
                    user = update.effective_user
                    if user is None or user.is_bot or user.id in self._people.allowed:
                        continue
                    found[user.id] = Sender(user.id, user.full_name, user.username)
            if self._offset is not None:
                await self._bot.get_updates(offset=self._offset, timeout=0)  # acknowledge
        except Exception as exc:
            raise ValueError(f"getUpdates failed: {one_line(exc)}") from None
        if not found:
            raise ValueError(f"nobody wrote to @{self._bot_name} in {DISCOVERY_S:g} s")
        self._people.found((s.user_id, s.describe()) for s in found.values())


def _id_list(text: str) -> list[int]:
    """``[1, 2]``, ``1, 2`` or ``1``: Telegram user ids (positive whole numbers)."""
    try:
        value = yaml.safe_load(text if text.strip().startswith("[") else f"[{text}]")
    except yaml.YAMLError:
        value = None
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in value
    ):
        raise ValueError(f"not a list of Telegram user ids: {text!r} (e.g. [4242, 5151])")
    return list(dict.fromkeys(value))
