"""Who may talk to the bot, where, and where a reply or a reminder goes.

The channel publishes a direct message with the *sender's* user id as the
kernel's user id (the address), and a mention in a guild channel with the
*channel's* id: the kernel keys a conversation by DM or by channel, and a
reply, a stream or a reminder addressed to it goes back there. Snowflakes of
users and channels never collide, so an address names one or the other. A
DM is served to allowed and paired users; a guild channel only when it is
in ``allowed_channel_ids`` (opt-in per channel), and even there only allowed
users are heard. Only served places are written to, so a stale or forged
address never makes the bot talk somewhere else. Each refusal is logged once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from .config import PREFIX, DiscordConfig


class UnservedTargetError(ValueError):
    """An address that is no DM or channel this bot serves (names the address and keys)."""


@dataclass(frozen=True, slots=True)
class Target:
    """A user's DM (``dm``, by user id) or a guild channel (``channel``, by channel id)."""

    kind: Literal["dm", "channel"]
    id: int


class Targets:
    def __init__(self, config: DiscordConfig, paired: set[str], logger: logging.Logger) -> None:
        self._config = config
        self.paired = paired  # user ids admitted by the owner's /pair (shared with Pairings)
        self._logger = logger
        self._reported: set[int] = set()

    def admits(self, user_id: int, who: str) -> bool:
        """True for allowed and paired users; the first refusal of each id is logged."""
        if user_id in self._config.allowed_user_ids or str(user_id) in self.paired:
            return True
        self._report(
            user_id,
            f"ignoring Discord user {user_id} ({who}): not in {PREFIX}.allowed_user_ids "
            f"nor paired; add {user_id} there (or /pair their code) to let them use Hearth",
        )
        return False

    def serves_channel(self, channel_id: int) -> bool:
        """True for opted-in guild channels; the first message from another is logged."""
        if channel_id in self._config.allowed_channel_ids:
            return True
        self._report(
            channel_id,
            f"ignoring a mention in Discord channel {channel_id}: not in "
            f"{PREFIX}.allowed_channel_ids; add {channel_id} there to be answered in it",
        )
        return False

    def target(self, address: str) -> Target:
        """The DM or channel an address names; ``UnservedTargetError`` if not served."""
        try:
            number = int(address)
        except ValueError:
            raise UnservedTargetError(
                f"{address!r} is not a Discord id (the channel's user ids are user or channel ids)"
            ) from None
        if number in self._config.allowed_channel_ids:
            return Target("channel", number)
        if number in self._config.allowed_user_ids or address.strip() in self.paired:
            return Target("dm", number)
        raise UnservedTargetError(
            f"Discord id {number} is not served: it is not in {PREFIX}.allowed_user_ids "
            f"or {PREFIX}.allowed_channel_ids, nor a paired user"
        )

    def default_target(self) -> Target:
        """Where a proactive message without an address goes: a user's DM."""
        if self._config.default_user_id is not None:
            return Target("dm", self._config.default_user_id)
        if self._config.allowed_user_ids:
            return Target("dm", self._config.allowed_user_ids[0])
        raise UnservedTargetError(
            f"no DM for a proactive message: set {PREFIX}.default_user_id "
            f"or {PREFIX}.allowed_user_ids"
        )

    def announce(self) -> None:
        """Say at startup whom we serve (and how to be admitted when nobody)."""
        if self._config.allowed_channel_ids:
            ids = ", ".join(str(i) for i in sorted(self._config.allowed_channel_ids))
            self._logger.info("serving mentions in Discord channels: %s", ids)
        if self._config.allowed_user_ids or self.paired:
            count = len(set(self._config.allowed_user_ids) | {int(p) for p in self.paired})
            self._logger.info("serving %d Discord user(s)", count)
            return
        self._logger.warning(
            "%s.allowed_user_ids is empty and nobody is paired: write to the bot in a DM "
            "and admit yourself with /pair CODE on another channel",
            PREFIX,
        )

    def _report(self, key: int, line: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self._logger.warning(line)
