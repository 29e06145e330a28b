"""Who may talk to the bot, in which rooms, and where a message goes (ADR 0093).

A *direct room* is one the bot shares with exactly one other member; an
allowed (or paired) user is always served there. A group room is served only
when its id is in ``allowed_room_ids``, and there only allowed users who
mention the bot are heard. Encrypted rooms are never served: this channel
has no end-to-end encryption (docs/matrix.md), so it says so once in the
room and in the log instead of answering what it cannot read.

The kernel's user id for a conversation is the *room id*, so a reply, a
stream or a reminder addressed to it goes back to that very room; an address
that is a served user's Matrix id (``@bob:example.org``, what the kernel
knows of a member from ``people:``) means their direct room. Only rooms
the configuration serves are written to, so a stale or forged address never
makes the bot talk elsewhere. What the bot knows of its rooms comes from the
first ``/sync`` (full state); ``target`` waits for it.
"""

from __future__ import annotations

import asyncio
import logging

from nio import AsyncClient, MatrixRoom

from .config import PREFIX, MatrixConfig

FIRST_SYNC_WAIT_S = 60.0


class UnservedRoomError(ValueError):
    """An address that is no room this bot serves (names the room and the keys)."""


class Rooms:
    def __init__(
        self,
        client: AsyncClient,
        config: MatrixConfig,
        logger: logging.Logger,
        paired: set[str] | None = None,
    ) -> None:
        self._client = client
        self._config = config
        self._log = logger
        self.paired = paired if paired is not None else set()  # admitted by the owner's /pair
        self.synced = asyncio.Event()  # set after the first /sync is handled
        self._reported: set[str] = set()

    # ------------------------------------------------------------ who

    def allowed(self, user_id: str) -> bool:
        return user_id in self._config.allowed_user_ids or user_id in self.paired

    def admits(self, user_id: str) -> bool:
        """True for allowed and paired users; the first refusal of each is logged."""
        if self.allowed(user_id):
            return True
        self._once(
            user_id,
            "ignoring Matrix user %s: not in %s.allowed_user_ids; add %s there (or /pair "
            "the code they were given) to let them use Hearth",
            user_id,
            PREFIX,
            user_id,
        )
        return False

    def is_direct(self, room: MatrixRoom) -> bool:
        """The bot and one other member (joined or invited)."""
        return room.room_id not in self._config.allowed_room_ids and room.member_count <= 2

    def serves_group(self, room: MatrixRoom) -> bool:
        if room.room_id in self._config.allowed_room_ids:
            return True
        self._once(
            room.room_id,
            "ignoring Matrix room %s (%s): not in %s.allowed_room_ids; add it there to let "
            "allowed users talk to Hearth in it by mentioning the bot",
            room.room_id,
            room.display_name,
            PREFIX,
        )
        return False

    def announce(self) -> None:
        """Say at startup whom we serve (and how to find one's id when nobody)."""
        if self._config.allowed_room_ids:
            rooms = ", ".join(sorted(self._config.allowed_room_ids))
            self._log.info("serving allowed users in Matrix rooms: %s", rooms)
        if self._config.allowed_user_ids:
            self._log.info("serving Matrix users: %s", ", ".join(self._config.allowed_user_ids))
            return
        self._log.warning(
            "%s.allowed_user_ids is empty: the bot answers nobody. Write to the bot; it answers "
            "with a pairing code for /pair, and this log shows your Matrix id",
            PREFIX,
        )

    # ------------------------------------------------------------ where

    async def target(self, address: str) -> str:
        """The room an address names, once the first sync told what the rooms are;
        ``UnservedRoomError`` if this bot does not serve it."""
        if not self.synced.is_set():
            async with asyncio.timeout(FIRST_SYNC_WAIT_S):
                await self.synced.wait()
        if address.startswith("@"):  # a person (an MCP client's reminder for a member)
            direct = self.direct_room_of(address) if self.allowed(address) else None
            if direct is None:
                raise UnservedRoomError(
                    f"Matrix user {address} has no direct room with the bot that is served "
                    f"(not in {PREFIX}.allowed_user_ids nor paired, or no direct chat yet)"
                )
            address = direct
        room = self._client.rooms.get(address)
        if room is None:
            raise UnservedRoomError(f"{address!r} is not a Matrix room the bot has joined")
        if room.encrypted:
            raise UnservedRoomError(f"Matrix room {address} is encrypted: not served")
        if address in self._config.allowed_room_ids or address == self._config.default_room_id:
            return address
        if self.is_direct(room) and any(self.allowed(u) for u in room.users):
            return address
        raise UnservedRoomError(
            f"Matrix room {address} is not served: it is no direct room of a user in "
            f"{PREFIX}.allowed_user_ids, nor in {PREFIX}.allowed_room_ids "
            f"(nor {PREFIX}.default_room_id)"
        )

    async def default_target(self) -> str:
        """Where a proactive message without an address goes."""
        if self._config.default_room_id is not None:
            return await self.target(self._config.default_room_id)
        if not self.synced.is_set():
            async with asyncio.timeout(FIRST_SYNC_WAIT_S):
                await self.synced.wait()
        for user_id in self._config.allowed_user_ids:
            for room in self._client.rooms.values():
                if self.is_direct(room) and user_id in room.users and not room.encrypted:
                    return room.room_id
        raise UnservedRoomError(
            f"no room for a proactive message: set {PREFIX}.default_room_id, or have the "
            f"first of {PREFIX}.allowed_user_ids open a direct chat with the bot"
        )

    def members(self, room_id: str) -> set[str]:
        room = self._client.rooms.get(room_id)
        return set(room.users) if room is not None else set()

    def direct_room_of(self, user_id: str) -> str | None:
        """The unencrypted direct room the bot shares with ``user_id``, if any."""
        for room in self._client.rooms.values():
            if self.is_direct(room) and user_id in room.users and not room.encrypted:
                return room.room_id
        return None

    def _once(self, key: str, message: str, *args: object) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self._log.warning(message, *args)
