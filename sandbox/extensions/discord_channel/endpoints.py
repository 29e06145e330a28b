"""Where discord.py connects: its REST base and its gateway are class attributes.

``discord.http.Route.BASE`` is the REST API (every request's URL starts with
it) and ``DiscordWebSocket.DEFAULT_GATEWAY`` the websocket discord.py opens
without asking Discord. Both are set here, from ``api_base_url`` and the URL
``GET /gateway/bot`` of that API answers — Discord's documented way to find the
gateway, and what lets a fake Discord stand in for both. Class attributes make
it one Discord per process, which is how Hearth runs its channel.
"""

from __future__ import annotations

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route


def use_api(api_base: str) -> None:
    """Send discord.py's REST requests to ``api_base`` (``.../api/v10``)."""
    Route.BASE = api_base


def use_gateway(url: str) -> None:
    """Open discord.py's gateway connections at ``url`` (from ``GET /gateway/bot``)."""
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)


def no_voice() -> None:
    """Hearth never joins voice: no warning, at the first client, that voice's
    optional libraries (PyNaCl, davey) are missing."""
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
