"""Matrix channel: Hearth in the household's own chat server (issue 48, ADR 0093).

A ``ServiceProvider`` whose background loop long-polls ``/sync``
(``syncing``: acknowledged after journaling, the token kept in the data
dir), a ``ChannelProvider`` for replies and proactive messages (``sender``:
rate limits honoured), and a ``StreamingChannelProvider`` that edits one
message as the reply grows (``streaming``, ``m.replace``). Only allow-listed
or paired users are served, in direct rooms and — when they mention the bot
— in opted-in group rooms (``rooms``); a stranger writing in a direct room
gets a pairing code for the owner's ``/pair`` and nothing else. The kernel's
user id is the room's id, so each room is its own conversation and replies
and reminders go back to it; each message carries its sender (identity
``matrix:@user:server`` in ``people:``). An ``InteractiveChannel``: questions
are numbered and answered by a reply or a reaction (``questions``). A
``SetupProvider``: ``main.py setup`` asks for the homeserver and the access
token, checked live with ``whoami`` (``setup``). Encrypted rooms are refused
with a message saying why (no end-to-end encryption, docs/matrix.md).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
from nio import (
    AsyncClient,
    AsyncClientConfig,
    ErrorResponse,
    InviteMemberEvent,
    MatrixRoom,
    MegolmEvent,
    ReactionEvent,
    RoomEncryptionEvent,
    RoomMessageMedia,
    RoomMessageText,
    SyncResponse,
    WhoamiResponse,
)

from core.extensions.contract import ExtensionContext, KeptFile, UserRequest
from core.extensions.sdk import WELCOME, ChatChannel, close_quietly

from .config import PREFIX, MatrixConfig, parse_config
from .files import keep_media, media_of, send_file
from .questions import QuestionBoard
from .rooms import Rooms
from .sender import Sender
from .setup import MatrixSetup
from .streaming import StreamPresenter
from .syncing import MatrixAuthError, Syncer

TOKEN_SECRET = "MATRIX_ACCESS_TOKEN"
VERIFY_TIMEOUT_S = 10.0
ENCRYPTED_NOTE = (
    "This room is end-to-end encrypted, and Hearth's Matrix channel cannot read "
    "encrypted rooms. Write to it in an unencrypted direct chat instead."
)


class MatrixSetupError(Exception):
    """The channel cannot run: no token or homeserver, or the homeserver refuses the token."""


class MatrixChannel(ChatChannel):
    def __init__(self) -> None:
        self._config: MatrixConfig | None = None
        self._client: AsyncClient | None = None
        self._rooms: Rooms | None = None
        self._sender: Sender | None = None
        self._stream: StreamPresenter | None = None
        self._board: QuestionBoard | None = None
        self._seen: dict[str, None] = {}  # event ids handled by this process (bounded)
        self._warned_encrypted: set[str] = set()
        self._stranger_rooms: dict[str, str] = {}  # stranger's id -> the room they got a code in

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        token = context.get_secret(TOKEN_SECRET)
        config = self._config = parse_config(context.get_config)
        if not token or config.homeserver_url is None:
            return  # only the setup loads it so (a normal start needs the token): start() refuses
        config_nio = AsyncClientConfig(
            max_limit_exceeded=0, max_timeouts=0, encryption_enabled=False, store_sync_tokens=False
        )
        client = self._client = AsyncClient(config.homeserver_url, config=config_nio)
        client.access_token = token
        log = context.logger
        pairings = await self.open_pairings(context.data_dir, label="Matrix", prefix="matrix")
        rooms = self._rooms = Rooms(client, config, log, pairings.admitted)
        self._sender = Sender(client, log)
        self._stream = StreamPresenter(self._sender, rooms, log, interval_s=config.edit_interval_s)
        self._board = QuestionBoard(self._sender, rooms, log)
        await self._verify_token()

    async def start(self) -> None:
        if self._client is None:
            missing = TOKEN_SECRET if self._cfg().homeserver_url else f"{PREFIX}.homeserver_url"
            raise MatrixSetupError(f"{missing} not set (`main.py setup` asks for it)")
        await super().start()
        self._parts()[1].announce()
        if self.auth_error is not None:
            await self._verify_token()

    async def destroy(self) -> None:
        await super().destroy()
        if self._client is not None:
            await close_quietly(self._client.close, self.context.logger, "the Matrix client")

    async def status_lines(self) -> list[str]:
        """What ``doctor`` and ``/status`` show: whom the token signs in as (checked
        live with ``whoami`` when the extension loaded), whom it serves, and that
        encrypted rooms are refused."""
        if self._client is None:
            return ["not set up: `main.py setup` asks for the homeserver and the access token"]
        config = self._cfg()
        paired = self.pairings.admitted if self.pairings else set()
        users = len(set(config.allowed_user_ids) | paired)
        return [
            f"signed in as {self._client.user_id} on {config.homeserver_url}",
            f"serving {users} user(s) in direct rooms and {len(config.allowed_room_ids)} "
            "group room(s); end-to-end encrypted rooms are refused",
        ]

    async def _verify_token(self) -> None:
        """``whoami``: a refused token fails the extension; an unreachable server does not."""
        client = self._parts()[0]
        try:
            async with asyncio.timeout(VERIFY_TIMEOUT_S):
                response = await client.whoami()
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.context.logger.warning(
                "cannot reach the Matrix homeserver %s (%s); syncing keeps retrying",
                self._cfg().homeserver_url,
                str(exc) or type(exc).__name__,
            )
            return
        if not isinstance(response, WhoamiResponse):
            self.auth_error = (
                f"the homeserver {self._cfg().homeserver_url} refused {TOKEN_SECRET} "
                f"({response.status_code}: {response.message})"
            )
            raise MatrixSetupError(self.auth_error)
        client.user_id = response.user_id
        client.device_id = response.device_id or client.device_id
        self.auth_error = None
        self.context.logger.info("connected to Matrix as %s", response.user_id)

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        client, rooms = self._parts()
        syncer = Syncer(
            client,
            self._on_sync,
            self.context.logger,
            self.context.data_dir,
            timeout_s=self._cfg().sync_timeout_s,
            after_first=rooms.synced.set,
        )
        try:
            await syncer.run()
        except MatrixAuthError as exc:
            self.auth_error = str(exc)
            raise MatrixSetupError(str(exc)) from None

    async def _on_sync(self, response: SyncResponse, skip_before_ms: int | None) -> None:
        """Invites first (a stranger's direct room is joined), then each joined
        room's new events in order."""
        client = self._parts()[0]
        for room_id, invite in response.rooms.invite.items():
            await self._on_invite(room_id, invite.invite_state)
        for room_id, info in response.rooms.join.items():
            room = client.rooms.get(room_id)
            if room is None:
                continue
            for event in info.timeline.events:
                if getattr(event, "sender", None) == client.user_id:
                    continue
                if skip_before_ms is not None and event.server_timestamp < skip_before_ms:
                    continue
                event_id = str(getattr(event, "event_id", ""))
                if event_id in self._seen:
                    continue
                await self._on_event(room, event)
                self._remember(event_id)

    async def _on_invite(self, room_id: str, state: list[Any]) -> None:
        client, rooms = self._parts()
        for event in state:
            if not isinstance(event, InviteMemberEvent) or event.state_key != client.user_id:
                continue
            if event.membership != "invite":
                continue
            direct = bool(event.content.get("is_direct"))
            if direct or rooms.allowed(event.sender) or room_id in self._cfg().allowed_room_ids:
                response = await client.join(room_id)
                if isinstance(response, ErrorResponse):
                    self.context.logger.warning("joining %s failed: %s", room_id, response)
                else:
                    self.context.logger.info("joined %s (invited by %s)", room_id, event.sender)
            else:
                self.context.logger.warning(
                    "ignoring the invite of %s to %s: not a direct chat, not from an allowed "
                    "user, not in extensions.matrix_channel.allowed_room_ids",
                    event.sender,
                    room_id,
                )

    async def _on_event(self, room: MatrixRoom, event: Any) -> None:
        if isinstance(event, RoomEncryptionEvent | MegolmEvent) or (
            room.encrypted and isinstance(event, RoomMessageText)
        ):
            await self._refuse_encrypted(room)
        elif isinstance(event, ReactionEvent):
            await self._on_reaction(room, event)
        elif isinstance(event, RoomMessageText):
            await self._on_text(room, event)
        elif isinstance(event, RoomMessageMedia):
            await self._on_media(room, event)

    async def _refuse_encrypted(self, room: MatrixRoom) -> None:
        if room.room_id in self._warned_encrypted:
            return
        self._warned_encrypted.add(room.room_id)
        self.context.logger.warning(
            "refusing Matrix room %s: it is end-to-end encrypted, which this channel does "
            "not support (docs/matrix.md)",
            room.room_id,
        )
        try:
            await self._send().send_text(room.room_id, ENCRYPTED_NOTE)
        except Exception as exc:
            self.context.logger.warning("could not tell %s why: %s", room.room_id, exc)

    async def _on_text(self, room: MatrixRoom, event: RoomMessageText) -> None:
        """Journal an allowed user's text, addressed to the room it came from; a
        stranger in a direct room gets a pairing code; everything else is dropped."""
        if event.source.get("content", {}).get("msgtype") == "m.notice":
            return  # another bot's notice: never answered (no bot loops)
        client, rooms = self._parts()
        text = event.body
        direct = rooms.is_direct(room)
        if not direct:
            if not rooms.serves_group(room) or not rooms.admits(event.sender):
                return
            mentioned = _mention_stripped(text, event.source, client.user_id or "")
            if mentioned is None:
                return
            text = mentioned
        elif not rooms.admits(event.sender):
            await self._offer_pairing(room.room_id, event.sender)
            return
        relates = event.source.get("content", {}).get("m.relates_to", {})
        if relates.get("rel_type") == "m.replace":
            return  # an edit of an earlier message: that one was answered
        reply_to = relates.get("m.in_reply_to", {}).get("event_id")
        answer = self._questions().typed_answer(
            room.room_id, event.sender, _without_quote(text), reply_to
        )
        if answer is not None:
            await self._answer(answer.request.id, answer.value, room.room_id, event.sender)
            if answer.request.kind == "secret":  # not left readable in the room
                try:
                    await self._send().redact(room.room_id, event.event_id, "secret answer")
                except Exception as exc:
                    self.context.logger.warning("a secret answer stays in the room: %s", exc)
            return
        await self.context.on_user_message(
            _without_quote(text),
            room.room_id,
            message_id=event.event_id,
            idempotency_key=f"matrix:{event.event_id}",
            sender_id=event.sender,
        )

    async def _on_media(self, room: MatrixRoom, event: RoomMessageMedia) -> None:
        """A picture, file or voice note from an allowed user in a direct room (ADR
        0096): kept, then journaled with its caption; group rooms' files are not taken."""
        rooms = self._parts()[1]
        if not rooms.is_direct(room):
            return
        if not rooms.admits(event.sender):
            await self._offer_pairing(room.room_id, event.sender)
            return
        media = media_of(event)

        async def refuse(note: str) -> None:
            await self._send().send_text(room.room_id, note)

        kept = await keep_media(self.context, self._send(), media, event.sender, refuse)
        if kept is not None:
            await self.context.on_user_message(
                media.caption,
                room.room_id,
                message_id=event.event_id,
                idempotency_key=f"matrix:{event.event_id}",
                sender_id=event.sender,
                files=[kept],
            )

    async def _on_reaction(self, room: MatrixRoom, event: ReactionEvent) -> None:
        if not self._parts()[1].allowed(event.sender):
            return
        found = self._questions().reaction_answer(
            room.room_id, event.sender, event.reacts_to, event.key
        )
        if found is not None:
            await self._answer(found[0], found[1], room.room_id, event.sender)

    async def _offer_pairing(self, room_id: str, sender: str) -> None:
        """A stranger's direct message: a one-time code for the owner's ``/pair``,
        once while it lives, and nothing else."""
        assert self.pairings is not None
        text = self.pairings.invite(sender)
        if text is None:
            return
        self._stranger_rooms[sender] = room_id
        self.context.logger.info("Matrix user %s was given a pairing code", sender)
        try:
            await self._send().send_text(room_id, text)
        except Exception as exc:  # a stranger's reply must not stop the sync loop
            self.context.logger.warning("the pairing code for %s was not sent: %s", sender, exc)

    async def greet(self, sender_id: str) -> None:
        """The owner's ``/pair`` admitted this user: they are told so in their room."""
        room_id = self._stranger_rooms.pop(sender_id, None) or self._parts()[1].direct_room_of(
            sender_id
        )
        if room_id is not None:
            await self._send().send_text(room_id, WELCOME)

    async def _answer(self, request_id: str, value: str, address: str, sender: str) -> None:
        await self.context.answer_request(request_id, value, address, sender_id=sender)

    def _remember(self, event_id: str) -> None:
        self._seen[event_id] = None
        if len(self._seen) > 5000:
            del self._seen[next(iter(self._seen))]

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        rooms = self._parts()[1]
        await self._send().send_text(await rooms.target(user_id), message)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A file a tool returned (ADR 0096): uploaded, then an ``m.image`` or ``m.file``."""
        await send_file(self._send(), await self._parts()[1].target(user_id), file)

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: ``default_room_id``, else the first
        allowed user's direct room."""
        await self._send().send_text(await self._parts()[1].default_target(), message)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self._questions().ask(user_id, request)

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        await self._questions().close(request_id, outcome)

    # ------------------------------------------------------------ setup

    def running_as(self) -> str | None:
        return self._client.user_id if self._client is not None else None

    def new_setup(self) -> MatrixSetup:
        config = self._cfg()
        return MatrixSetup(
            TOKEN_SECRET,
            self.context.get_secret(TOKEN_SECRET),
            config.homeserver_url,
            list(config.allowed_user_ids),
        )

    # ------------------------------------------------------------ accessors

    def _cfg(self) -> MatrixConfig:
        assert self._config is not None, "initialize() was not called"
        return self._config

    def _parts(self) -> tuple[AsyncClient, Rooms]:
        assert self._client and self._rooms, "initialize() was not called"
        return self._client, self._rooms

    def _send(self) -> Sender:
        assert self._sender is not None, "initialize() was not called"
        return self._sender

    def edited_stream(self) -> StreamPresenter:
        assert self._stream is not None, "initialize() was not called"
        return self._stream

    def _questions(self) -> QuestionBoard:
        assert self._board is not None, "initialize() was not called"
        return self._board


def _mention_stripped(text: str, source: dict[str, Any], bot_id: str) -> str | None:
    """The text without the mention of the bot; ``None`` when the bot is not mentioned
    (``m.mentions``, its full id, or its name followed by a colon at the start)."""
    content = source.get("content", {})
    mentions = content.get("m.mentions", {}).get("user_ids", [])
    localpart = bot_id[1:].split(":", 1)[0] if bot_id else ""
    leading = re.match(rf"^\s*@?{re.escape(localpart)}\s*[:,]\s*", text, re.IGNORECASE)
    if leading and localpart:
        return text[leading.end() :].strip()
    if bot_id and bot_id in text:
        return text.replace(bot_id, "").strip(" :,\n")
    if bot_id in mentions:
        return text.strip()
    return None


def _without_quote(text: str) -> str:
    """A reply's body quotes the message replied to (``> ...`` lines): dropped."""
    lines = text.splitlines()
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).strip() or text.strip()
