"""Who may talk to the bot, and where a reply goes (the Slack side of ADR 0017).

The channel's address for a conversation (the kernel's user id) is

- ``U0123ABCD``: a person's direct messages with the bot (their member id, so
  a reminder for ``slack:U0123ABCD`` in ``people:`` reaches their DM);
- ``C0123ABCD``: a channel, for mentions at its top level;
- ``C0123ABCD/1700000000.000100``: a thread in a channel (its parent's ``ts``).

So the kernel keys a conversation by DM, channel or thread, and a reply, a
stream or a reminder goes back where it came from. Only the DMs of allowed
(or paired) users, the listed channels and ``default_address`` are written to,
so a stale or forged address never makes the bot talk anywhere else.
Everything refused is logged once per user or channel.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .config import CHANNEL_ID_RE, PREFIX, USER_ID_RE, SlackConfig


class UnservedAddressError(ValueError):
    """An address that is nowhere this bot serves (names the address and the keys)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to post: a user's DM (``user``), or a channel and maybe a thread."""

    user: str | None = None
    channel: str | None = None
    thread_ts: str | None = None


def address_of(channel: str, thread_ts: str | None) -> str:
    """The address of a channel conversation (a thread's when ``thread_ts``)."""
    return f"{channel}/{thread_ts}" if thread_ts else channel


class Targets:
    """The allow-list and the addresses it lets the bot write to."""

    def __init__(
        self, config: SlackConfig, logger: logging.Logger, paired: set[str] | None = None
    ) -> None:
        self._config = config
        self._log = logger
        self.paired = paired if paired is not None else set()  # admitted by the owner's /pair
        self._reported: set[str] = set()

    # ------------------------------------------------------------ who

    def admits(self, user: str) -> bool:
        """True for allowed and paired users; the first refusal of each is logged."""
        if user in self._config.allowed_user_ids or user in self.paired:
            return True
        self._once(
            user,
            f"ignoring Slack user {user}: not in {PREFIX}.allowed_user_ids; "
            f"add {user} there (or /pair them) to let them use Hearth",
        )
        return False

    def admits_channel(self, channel: str) -> bool:
        """True for the listed channels; the first mention anywhere else is logged."""
        if channel in self._config.allowed_channel_ids:
            return True
        self._once(
            channel,
            f"ignoring Slack channel {channel}: not in {PREFIX}.allowed_channel_ids; "
            f"add {channel} there to let allowed users talk to Hearth in it",
        )
        return False

    def announce(self) -> None:
        """Say at startup whom we serve (and how to find one's id when nobody)."""
        if self._config.allowed_channel_ids:
            ids = ", ".join(sorted(self._config.allowed_channel_ids))
            self._log.info("serving allowed users who mention the bot in Slack channels %s", ids)
        if self._config.allowed_user_ids:
            self._log.info("serving Slack users %s", ", ".join(self._config.allowed_user_ids))
            return
        self._log.warning(
            "%s.allowed_user_ids is empty: the bot answers nobody but pairing codes. "
            "Write to the bot; this log then shows your member id to add there",
            PREFIX,
        )

    # ------------------------------------------------------------ where

    def target(self, address: str) -> Target:
        """Where an address posts; ``UnservedAddressError`` if this bot does not serve it."""
        address = address.strip()
        channel, _, thread = address.partition("/")
        if address == self._config.default_address:
            pass
        elif USER_ID_RE.match(channel) and not thread:
            if channel not in self._config.allowed_user_ids and channel not in self.paired:
                raise UnservedAddressError(
                    f"Slack user {channel} is not served: not in {PREFIX}.allowed_user_ids "
                    "and not paired"
                )
        elif CHANNEL_ID_RE.match(channel):
            if channel not in self._config.allowed_channel_ids:
                raise UnservedAddressError(
                    f"Slack channel {channel} is not served: not in {PREFIX}.allowed_channel_ids"
                )
        else:
            raise UnservedAddressError(
                f"{address!r} is not a Slack address (a member id U..., a channel id C..., "
                "or CHANNEL/THREAD_TS)"
            )
        if USER_ID_RE.match(channel):
            return Target(user=channel)
        return Target(channel=channel, thread_ts=thread or None)

    def default_address(self) -> str:
        """Where a proactive message without an address goes."""
        if self._config.default_address is not None:
            return self._config.default_address
        if self._config.allowed_user_ids:
            return self._config.allowed_user_ids[0]
        raise UnservedAddressError(
            f"no Slack conversation for a proactive message: set {PREFIX}.default_address "
            f"or {PREFIX}.allowed_user_ids"
        )

    def _once(self, key: str, message: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self._log.warning("%s", message)
