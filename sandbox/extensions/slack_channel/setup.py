"""The channel's own setup (a ``SetupProvider``): the two tokens, then the allow-list.

``main.py setup`` loads the extension (without its tokens the first time) and
walks these questions; the schema grows with the answers (ADR 0053). The bot
token is checked with ``auth.test`` and the app-level token with
``apps.connections.open`` before either is taken — a refused one is asked
again. With both working the user may have someone write to the bot: for
``DISCOVERY_S`` seconds a Socket Mode connection listens, and the senders of
direct messages are offered one by one (their envelopes are acknowledged, so
nobody looks up a member id). The last question shows the resulting
``allowed_user_ids``; the wizard keeps it in the local settings layer and the
tokens in ``.env``. A channel already running has nothing to ask: ``/pair``
admits people there, and a second connection would take half its events.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from core.extensions.sdk import AllowListQuestions, one_line, running_note, secret_field

from .config import USER_ID_RE

SETUP_TIMEOUT_S = 10.0
DISCOVERY_S = 60.0


class SlackSetup:
    """The answers so far, and what they lead to ask next."""

    def __init__(
        self,
        secrets: tuple[str, str],
        now: tuple[str | None, str | None],
        base_url: str,
        allowed: list[str],
    ) -> None:
        self._bot_secret, self._app_secret = secrets
        self._bot_now, self._app_now = now
        self._base_url = base_url
        self._people = AllowListQuestions(
            allowed, _id_list, "Slack member ids to serve (a list, e.g. [U0123ABCD])"
        )
        self._bot_token: str | None = None
        self._app_token: str | None = None
        self._bot_name: str | None = None

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        fields = [
            secret_field(self._bot_secret, "Bot User OAuth Token (xoxb-...)", self._bot_now),
        ]
        if self._bot_name is None:
            return fields
        fields.append(
            secret_field(
                self._app_secret, "App-level token with connections:write (xapp-...)", self._app_now
            )
        )
        if self._app_token is None:
            return fields
        discover = (
            f"Add someone to the allow-list? Have them send a direct message to "
            f"@{self._bot_name}, then answer yes (waits up to {DISCOVERY_S:g} s)"
        )
        return fields + self._people.fields(discover)

    async def apply(self, name: str, value: str) -> None:
        """Take one answer; ``ValueError`` refuses it (it is asked again)."""
        if name == self._bot_secret:
            await self._check_bot(value.strip())
        elif name == self._app_secret:
            await self._check_app(value.strip())
        elif not await self._people.apply(name, value, self._discover):
            raise ValueError(f"unknown setup field {name!r}")

    async def complete(self, running: bool, running_as: str | None) -> tuple[bool, str]:
        if running:
            return running_note(f"the bot {running_as}" if running_as else None)
        if self._bot_name is None or self._app_token is None:
            return False, "no working Slack tokens: Slack stays off"
        return True, self._people.serves(f"the bot @{self._bot_name}")

    async def aclose(self) -> None:
        """Nothing stays open between answers (each check makes its own client)."""

    async def _check_bot(self, token: str) -> None:
        self._bot_name = None
        client = AsyncWebClient(token=token, base_url=self._base_url, retry_handlers=[])
        try:
            async with asyncio.timeout(SETUP_TIMEOUT_S):
                me = await client.auth_test()
        except TimeoutError:
            raise ValueError("the Slack Web API did not answer auth.test in time") from None
        except Exception as exc:
            raise ValueError(f"Slack refused the bot token (auth.test): {one_line(exc)}") from None
        self._bot_token, self._bot_name = token, str(me.get("user"))

    async def _check_app(self, token: str) -> None:
        self._app_token = None
        client = AsyncWebClient(token=token, base_url=self._base_url, retry_handlers=[])
        try:
            async with asyncio.timeout(SETUP_TIMEOUT_S):
                await client.apps_connections_open(app_token=token)
        except TimeoutError:
            raise ValueError("Slack did not answer apps.connections.open in time") from None
        except Exception as exc:
            raise ValueError(
                f"Slack refused the app-level token (apps.connections.open): {one_line(exc)}"
            ) from None
        self._app_token = token

    async def _discover(self) -> None:
        """Who sends the bot a DM within ``DISCOVERY_S`` (people, not allowed already)."""
        assert self._bot_token is not None and self._app_token is not None
        found: list[str] = []
        arrived = asyncio.Event()
        web = AsyncWebClient(token=self._bot_token, base_url=self._base_url, retry_handlers=[])
        socket = SocketModeClient(app_token=self._app_token, web_client=web)

        async def listen(client: SocketModeClient, request: SocketModeRequest) -> None:
            await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))
            event = (request.payload or {}).get("event") or {}
            user = str(event.get("user", ""))
            dm = event.get("type") == "message" and event.get("channel_type") == "im"
            if dm and not event.get("bot_id") and USER_ID_RE.match(user):
                if user not in self._people.allowed and user not in found:
                    found.append(user)
                    arrived.set()

        socket.socket_mode_request_listeners.append(listen)  # type: ignore[arg-type]
        try:
            await socket.connect()
            async with asyncio.timeout(DISCOVERY_S):
                await arrived.wait()
        except TimeoutError:
            pass
        except Exception as exc:
            raise ValueError(f"Socket Mode failed: {one_line(exc)}") from None
        finally:
            await socket.close()
        if not found:
            raise ValueError(f"nobody wrote to @{self._bot_name} in {DISCOVERY_S:g} s")
        self._people.found((u, f"Slack user {u}") for u in found)


def _id_list(text: str) -> list[str]:
    """``[U1, U2]``, ``U1, U2`` or ``U1``: Slack member ids."""
    ids = [i for i in re.split(r"[\[\]\s,\"']+", text) if i]
    bad = [i for i in ids if not USER_ID_RE.match(i)]
    if bad:
        raise ValueError(f"not Slack member ids: {', '.join(bad)} (e.g. [U0123ABCD])")
    return list(dict.fromkeys(ids))
