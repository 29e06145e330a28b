"""The channel's own setup (a ``SetupProvider``): bot token, then the allow-list.

``main.py setup`` loads the extension without its token and walks these
questions; the schema grows with the answers (ADR 0053). The token is
checked live with ``GET /users/@me`` before it is taken — a refused one is
asked again. With a working bot the user may have someone write to it in a
DM: the senders of the next ``DISCOVERY_S`` seconds (a gateway connection of
its own, closed afterwards; nobody is answered) are offered one by one, so
nobody looks up a numeric id (Discord shows ids only in developer mode). The
last question shows the resulting ``allowed_user_ids``; the wizard keeps that
answer in the local settings layer and the token in ``.env``. A channel that
is already running has nothing to ask: ``/pair`` admits people there.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
import yaml

from core.extensions.sdk import AllowListQuestions, one_line, running_note, secret_field

from .endpoints import no_voice, use_api, use_gateway

SETUP_TIMEOUT_S = 10.0
DISCOVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class Writer:
    """Someone who wrote to the bot: whom to offer for the allow-list."""

    user_id: str
    name: str

    def describe(self) -> str:
        return f"{self.name}, id {self.user_id}"


class DiscordSetup:
    """The answers so far, and what they lead to ask next."""

    def __init__(
        self, token_secret: str, token_now: str | None, api_base: str, allowed: list[str]
    ) -> None:
        self._secret = token_secret
        self._token_now = token_now
        self._api_base = api_base
        self._people = AllowListQuestions(allowed, id_list, "Discord user ids to serve (a list)")
        self._token: str | None = None
        self._gateway: str | None = None
        self._bot_name: str | None = None

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        token = secret_field(
            self._secret, "Discord bot token (developer portal, Bot tab)", self._token_now
        )
        if self._bot_name is None:
            return [token]
        discover = (
            f"Add someone to the allow-list? Have them write a DM to {self._bot_name}, "
            f"then answer yes (waits up to {DISCOVERY_S:g} s)"
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
            return running_note(f"the bot {running_as}" if running_as else None)
        if self._bot_name is None:
            return False, "no working bot token: Discord stays off"
        return True, self._people.serves(f"the bot {self._bot_name}")

    async def aclose(self) -> None:
        """Nothing stays open between questions (each check has its own session)."""

    async def _check_token(self, token: str) -> None:
        """``GET /users/@me`` with the token (and ``GET /gateway/bot`` for discovery)."""
        self._bot_name = self._token = None
        me = await self._get(token, "/users/@me", "the token")
        gateway = await self._get(token, "/gateway/bot", "the gateway")
        self._token, self._gateway = token, str(gateway.get("url", ""))
        self._bot_name = str(me.get("username") or me["id"])

    async def _get(self, token: str, path: str, what: str) -> dict[str, Any]:
        headers = {"Authorization": f"Bot {token}"}
        try:
            async with (
                asyncio.timeout(SETUP_TIMEOUT_S),
                aiohttp.ClientSession(headers=headers) as session,
                session.get(f"{self._api_base}{path}") as response,
            ):
                body = await response.json(content_type=None)
        except TimeoutError:
            raise ValueError(f"the Discord API did not answer GET {path} in time") from None
        except (aiohttp.ClientError, ValueError) as exc:
            raise ValueError(f"cannot reach the Discord API: {one_line(exc)}") from None
        if response.status != 200 or not isinstance(body, dict) or not body:
            detail = body.get("message", "") if isinstance(body, dict) else body
            raise ValueError(
                f"Discord refused {what} (GET {path}: {response.status} {one_line(detail)})"
            )
        return body

    async def _discover(self) -> None:
        """Who writes a DM to the bot within ``DISCOVERY_S`` (not bots, not allowed
        already), seen on a gateway connection of its own."""
        assert self._token is not None and self._gateway, "the token is checked first"
        use_api(self._api_base)
        use_gateway(self._gateway)
        no_voice()
        intents = discord.Intents.none()
        intents.dm_messages = True
        client = discord.Client(intents=intents)
        found: dict[str, Writer] = {}
        someone = asyncio.Event()

        async def on_message(message: discord.Message) -> None:
            author = message.author
            writer = str(author.id)
            if message.guild is None and not author.bot and writer not in self._people.allowed:
                found[writer] = Writer(writer, str(author))
                someone.set()

        client.on_message = on_message  # type: ignore[attr-defined]
        runner = asyncio.create_task(client.start(self._token))
        try:
            async with asyncio.timeout(DISCOVERY_S):
                await asyncio.wait(
                    [runner, asyncio.ensure_future(someone.wait())],
                    return_when=asyncio.FIRST_COMPLETED,
                )
        except TimeoutError:
            pass
        finally:
            await client.close()
            runner.cancel()
        if runner.done() and not runner.cancelled() and runner.exception() is not None:
            raise ValueError(f"the Discord gateway failed: {one_line(runner.exception())}")
        if not found:
            raise ValueError(f"nobody wrote to {self._bot_name} in {DISCOVERY_S:g} s")
        self._people.found((w.user_id, w.describe()) for w in found.values())


def id_list(text: str) -> list[str]:
    """``[1, 2]``, ``1, 2`` or ``1``: Discord user ids (positive whole numbers), as text."""
    try:
        value = yaml.safe_load(text if text.strip().startswith("[") else f"[{text}]")
    except yaml.YAMLError:
        value = None
    if not isinstance(value, list) or not all(
        (isinstance(i, int) and not isinstance(i, bool) and i > 0)
        or (isinstance(i, str) and i.isdigit())
        for i in value
    ):
        raise ValueError(f"not a list of Discord user ids: {text!r} (e.g. [80351110224678912])")
    return list(dict.fromkeys(str(i) for i in value))
