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
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
import yaml

from .endpoints import no_voice, use_api, use_gateway

SETUP_TIMEOUT_S = 10.0
DISCOVERY_S = 60.0
YES, NO = "yes", "no"
DISCOVER = "discover"
ALLOWED = "allowed_user_ids"
ALLOW_PREFIX = "allow_"


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
        self._allowed = list(allowed)
        self._token: str | None = None
        self._gateway: str | None = None
        self._bot_name: str | None = None
        self._found: list[Writer] = []

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        fields: list[dict[str, Any]] = [self._token_field()]
        if self._bot_name is None:
            return fields
        fields.append(
            {
                "name": DISCOVER,
                "prompt": (
                    f"Add someone to the allow-list? Have them write a DM to {self._bot_name}, "
                    f"then answer yes (waits up to {DISCOVERY_S:g} s)"
                ),
                "choices": [YES, NO],
                "default": NO if self._allowed else YES,
            }
        )
        for writer in self._found:
            fields.append(
                {
                    "name": f"{ALLOW_PREFIX}{writer.user_id}",
                    "prompt": f"{writer.describe()} wrote. Allow them",
                    "choices": [YES, NO],
                    "default": YES,
                }
            )
        fields.append(
            {
                "name": ALLOWED,
                "prompt": "Discord user ids to serve (a list)",
                "default": json.dumps(self._allowed),
                "required": False,
            }
        )
        return fields

    def _token_field(self) -> dict[str, Any]:
        keeps = " (hidden; Enter keeps the one set now)" if self._token_now else " (hidden)"
        field: dict[str, Any] = {
            "name": self._secret,
            "prompt": f"Discord bot token (developer portal, Bot tab){keeps}",
            "secret": True,
            "required": False,
        }
        if self._token_now:
            field["default"] = self._token_now  # never shown: the field is secret
        return field

    async def apply(self, name: str, value: str) -> None:
        """Take one answer; ``ValueError`` refuses it (it is asked again)."""
        if name == self._secret:
            await self._check_token(value.strip())
        elif name == DISCOVER:
            if value == YES:
                await self._discover()
        elif name.startswith(ALLOW_PREFIX):
            user_id = name.removeprefix(ALLOW_PREFIX)
            if value == YES and user_id not in self._allowed:
                self._allowed.append(user_id)
        elif name == ALLOWED:
            self._allowed = id_list(value)
        else:
            raise ValueError(f"unknown setup field {name!r}")

    async def complete(self, running: bool, running_as: str | None) -> tuple[bool, str]:
        if running:
            bot = f"the bot {running_as}" if running_as else "the bot"
            return True, f"{bot} is running; /pair admits someone, `main.py setup` changes the bot"
        if self._bot_name is None:
            return False, "no working bot token: Discord stays off"
        ids = ", ".join(self._allowed) or "nobody yet (/pair admits someone later)"
        return True, f"the bot {self._bot_name} serves {ids}; start Hearth to use it"

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
            raise ValueError(f"cannot reach the Discord API: {_one_line(exc)}") from None
        if response.status != 200 or not isinstance(body, dict) or not body:
            detail = body.get("message", "") if isinstance(body, dict) else body
            raise ValueError(
                f"Discord refused {what} (GET {path}: {response.status} {_one_line(detail)})"
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
            if message.guild is None and not author.bot and str(author.id) not in self._allowed:
                found[str(author.id)] = Writer(str(author.id), str(author))
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
            raise ValueError(f"the Discord gateway failed: {_one_line(runner.exception())}")
        if not found:
            raise ValueError(f"nobody wrote to {self._bot_name} in {DISCOVERY_S:g} s")
        self._found += [w for w in found.values() if w not in self._found]


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


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
