"""The channel's own setup (a ``SetupProvider``): homeserver, access token, allow-list.

``main.py setup`` loads the extension without its token and walks these
questions; the schema grows with the answers (ADR 0053). The homeserver URL
is checked (``/_matrix/client/versions``) and the token with ``whoami``
before either is taken — a refused one is asked again. The last question is
``allowed_user_ids`` (Matrix ids such as ``@alice:example.org``); the wizard
keeps the URL and the list in the local settings layer and the token in
``.env``. A channel that is already running has nothing to ask: ``/pair``
admits people there.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import yaml
from nio import AsyncClient, WhoamiResponse

from core.extensions.sdk import AllowListQuestions, one_line, running_note, secret_field

SETUP_TIMEOUT_S = 10.0
HOMESERVER = "homeserver_url"
_USER_ID_RE = re.compile(r"^@[^:\s]+:\S+$")


class MatrixSetup:
    """The answers so far, and what they lead to ask next."""

    def __init__(
        self, token_secret: str, token_now: str | None, homeserver: str | None, allowed: list[str]
    ) -> None:
        self._secret = token_secret
        self._token_now = token_now
        self._homeserver = homeserver
        self._people = AllowListQuestions(
            allowed, user_id_list, 'Matrix users to serve (a list, e.g. ["@alice:example.org"])'
        )
        self._bot_id: str | None = None

    def schema(self, running: bool) -> list[dict[str, Any]]:
        if running:
            return []
        fields: list[dict[str, Any]] = [
            {
                "name": HOMESERVER,
                "prompt": "Homeserver URL (e.g. https://matrix.example.org)",
                **({"default": self._homeserver} if self._homeserver else {}),
            }
        ]
        if self._homeserver is None:
            return fields
        fields.append(secret_field(self._secret, "The bot account's access token", self._token_now))
        if self._bot_id is None:
            return fields
        fields += self._people.fields(None)
        return fields

    async def apply(self, name: str, value: str) -> None:
        """Take one answer; ``ValueError`` refuses it (it is asked again)."""
        if name == HOMESERVER:
            await self._check_homeserver(value.strip().rstrip("/"))
        elif name == self._secret:
            await self._check_token(value.strip())
        elif not await self._people.apply(name, value):
            raise ValueError(f"unknown setup field {name!r}")

    async def complete(self, running: bool, running_as: str | None) -> tuple[bool, str]:
        if running:
            return running_note(running_as)
        if self._bot_id is None:
            return False, "no working access token: Matrix stays off"
        return True, self._people.serves(self._bot_id)

    async def aclose(self) -> None:
        """Nothing stays open between answers (each check closes its client)."""

    async def _check_homeserver(self, url: str) -> None:
        if not re.match(r"^https?://\S+$", url):
            raise ValueError(f"{url!r} is not an http(s) URL (e.g. https://matrix.example.org)")
        try:
            async with (
                asyncio.timeout(SETUP_TIMEOUT_S),
                aiohttp.ClientSession() as session,
                session.get(f"{url}/_matrix/client/versions") as response,
            ):
                if response.status != 200:
                    raise ValueError(f"{url} is no Matrix homeserver (HTTP {response.status})")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ValueError(f"cannot reach {url}: {one_line(exc)}") from None
        self._homeserver = url

    async def _check_token(self, token: str) -> None:
        assert self._homeserver is not None, "the homeserver is asked first"
        self._bot_id = None
        self._bot_id = await whoami(self._homeserver, token)


async def whoami(homeserver: str, token: str) -> str:
    """The Matrix id the token belongs to; ``ValueError`` naming why not."""
    client = AsyncClient(homeserver)
    client.access_token = token
    try:
        async with asyncio.timeout(SETUP_TIMEOUT_S):
            response = await client.whoami()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise ValueError(f"the homeserver did not answer whoami: {one_line(exc)}") from None
    finally:
        await client.close()
    if not isinstance(response, WhoamiResponse):
        raise ValueError(
            f"the homeserver refused the token (whoami: {response.status_code} {response.message})"
        )
    return str(response.user_id)


def user_id_list(text: str) -> list[str]:
    """``["@a:x", "@b:y"]``: Matrix user ids, quoted (the wizard keeps the answer as
    YAML, where a bare ``@`` cannot start a value)."""
    try:
        value = yaml.safe_load(text) if text.strip() else []
    except yaml.YAMLError:
        value = None
    if not isinstance(value, list) or not all(
        isinstance(i, str) and _USER_ID_RE.match(i) for i in value
    ):
        raise ValueError(
            f"not a list of quoted Matrix user ids: {text!r} "
            '(e.g. ["@alice:example.org", "@bob:example.org"])'
        )
    return list(dict.fromkeys(value))
