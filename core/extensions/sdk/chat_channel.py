"""What the chat channels do alike around their platform client (ADR 0103).

Telegram, Discord, Slack and Matrix differ in their client and their wire, not
in the plumbing around it, which lives here once:

- a stranger gets a pairing code and the owner's ``/pair`` admits them: the
  channel's ``Pairings`` are loaded from its data dir (``open_pairings``),
  answered while the channel runs and no longer once it is destroyed;
- a reply streams by editing one message (``EditedStreamChannel``);
- ``main.py setup`` walks the channel's own questions (a ``ChannelSetup``,
  made when first asked, closed with the channel), which ask nothing once the
  channel runs;
- the channel is unhealthy while the platform refuses its token
  (``auth_error``);
- a half-open client is closed without failing the shutdown (``close_quietly``).

A channel overrides ``start`` and ``destroy`` for its own client and calls
``super()`` first.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from core.extensions.sdk.base import BaseExtension
from core.extensions.sdk.edited_stream import EditedStreamChannel
from core.extensions.sdk.pairing import Pairings

__all__ = ["ChannelSetup", "ChatChannel", "close_quietly"]


class ChannelSetup(Protocol):
    """A chat channel's setup questions (a ``SetupProvider`` behind the channel)."""

    def schema(self, running: bool) -> list[dict[str, Any]]: ...

    async def apply(self, name: str, value: str) -> None: ...

    async def complete(self, running: bool, running_as: str | None) -> tuple[bool, str]: ...

    async def aclose(self) -> None: ...


class ChatChannel(EditedStreamChannel, BaseExtension):
    """The pairing, setup, health and streaming plumbing of a chat channel."""

    pairings: Pairings | None = None
    """Set by ``open_pairings`` in ``initialize``; ``None`` while not set up."""
    auth_error: str | None = None
    """Why the platform refuses the token; the channel is unhealthy while set."""
    running: bool = False
    """Whether ``start`` ran: the setup then has nothing to ask."""
    __setup: ChannelSetup | None = None  # mangled: made by setup_flow, closed by destroy

    @abstractmethod
    def new_setup(self) -> ChannelSetup:
        """The channel's setup questions, made when the wizard first asks."""

    @abstractmethod
    def running_as(self) -> str | None:
        """Whom the bot is, once the platform said so (for the setup's last line)."""

    @abstractmethod
    async def greet(self, sender_id: str) -> None:
        """Tell a sender the owner's ``/pair`` admitted that they are in."""

    async def open_pairings(self, data_dir: Path, *, label: str, prefix: str) -> Pairings:
        """The channel's pairings, with the senders admitted before read back."""
        pairings = self.pairings = Pairings(data_dir, label=label, prefix=prefix)
        await asyncio.to_thread(pairings.load)
        return pairings

    async def start(self) -> None:
        """Running from now on: ``/pair`` answers this channel's codes."""
        self.running = True
        if self.pairings is not None:
            self.pairings.register(self.greet)

    async def destroy(self) -> None:
        """Codes are no longer answered; a setup's open client is closed."""
        if self.pairings is not None:
            self.pairings.unregister()
        if self.__setup is not None:
            await self.__setup.aclose()

    def health_check(self) -> bool:
        return self.auth_error is None

    def get_setup_schema(self) -> list[dict[str, Any]]:
        return self.setup_flow().schema(self.running)

    async def apply_config(self, name: str, value: str) -> None:
        await self.setup_flow().apply(name, value)

    async def on_setup_complete(self) -> tuple[bool, str]:
        return await self.setup_flow().complete(self.running, self.running_as())

    def setup_flow(self) -> ChannelSetup:
        """The setup questions, the same ones for every answer of one wizard run."""
        if self.__setup is None:
            self.__setup = self.new_setup()
        return self.__setup


async def close_quietly(
    close: Callable[[], Awaitable[object]], logger: logging.Logger, what: str
) -> None:
    """Close a client; a half-open one failing to close must not fail the shutdown."""
    try:
        await close()
    except Exception as exc:
        logger.debug("closing %s: %s", what, exc)
