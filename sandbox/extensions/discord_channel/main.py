"""Discord channel: Hearth in direct messages and server channels (ADR 0094).

A ``ServiceProvider`` whose background task holds discord.py's gateway
connection (``Client.connect``: heartbeats, reconnects and resumes are
discord.py's), a ``ChannelProvider`` for replies and proactive messages
(``sender``), and a ``StreamingChannelProvider`` that edits one message as the
reply grows (``streaming``). Allowed and paired users are served in DMs, and
in the guild channels of ``allowed_channel_ids`` when they mention the bot
(``targets``); a stranger's DM gets a pairing code and nothing else. A DM's
address is the user's id, a channel's its id, so each is a conversation and
replies and reminders go back there. Each message carries its sender (the
identity ``discord:<user id>``) and its message id as the idempotency key, so
a message the gateway delivers again after a restart is not answered twice.
An ``InteractiveChannel``: questions get buttons answered in place
(``questions``). A ``SetupProvider`` (``setup``) and a ``StatusReporter``
(``doctor``, ``/status``).

discord.py takes its endpoints from class attributes (``endpoints``): the REST
API from ``api_base_url``, the gateway from ``GET /gateway/bot``; one Discord
channel runs per process.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import aiohttp
import discord

from core.extensions.contract import ExtensionContext, KeptFile, UserRequest
from core.extensions.sdk import WELCOME, Backoff, ChatChannel, close_quietly

from .config import DiscordConfig, parse_config
from .endpoints import no_voice, use_api, use_gateway
from .files import keep_attachments, send_file
from .questions import QuestionBoard
from .sender import RATE_LIMIT_MAX_S, Sender
from .setup import DiscordSetup
from .streaming import StreamPresenter
from .targets import Target, Targets

TOKEN_SECRET = "DISCORD_BOT_TOKEN"
VERIFY_TIMEOUT_S = 10.0
CONNECT_BACKOFF = Backoff(1.0, 60.0)
REJECTED = (
    f"Discord rejected {TOKEN_SECRET} (401 Unauthorized); copy the bot's token from "
    "https://discord.com/developers/applications"
)


class DiscordSetupError(Exception):
    """The channel cannot run: no token, or Discord refuses it."""


class DiscordChannel(ChatChannel):
    def __init__(self) -> None:
        self._config: DiscordConfig | None = None
        self._token: str | None = None
        self._client: discord.Client | None = None
        self._targets: Targets | None = None
        self._sender: Sender | None = None
        self._stream: StreamPresenter | None = None
        self._board: QuestionBoard | None = None
        self._logged_in = False

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        token = self._token = context.get_secret(TOKEN_SECRET)
        config = self._config = parse_config(context.get_config)
        if not token:
            return  # only the setup loads it so (a normal start skips it): start() refuses
        use_api(config.api_base_url)
        no_voice()
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = True
        client = self._client = discord.Client(
            intents=intents, max_ratelimit_timeout=RATE_LIMIT_MAX_S, chunk_guilds_at_startup=False
        )
        client.on_message = self._on_message  # type: ignore[attr-defined]
        client.on_interaction = self._on_interaction  # type: ignore[attr-defined]
        log = context.logger
        pairings = await self.open_pairings(context.data_dir, label="Discord", prefix="discord")
        targets = self._targets = Targets(config, pairings.admitted, log)
        sender = self._sender = Sender(client, log)
        self._stream = StreamPresenter(sender, targets, log, interval_s=config.edit_interval_s)
        self._board = QuestionBoard(sender, targets, log)
        try:
            await self._login()
        except DiscordSetupError:
            await client.close()
            raise

    async def start(self) -> None:
        if self._client is None:
            raise DiscordSetupError(f"{TOKEN_SECRET} not set (`main.py setup` asks for it)")
        await super().start()
        self._parts()[1].announce()
        if self.auth_error is not None:
            await self._login()

    async def destroy(self) -> None:
        await super().destroy()
        if self._client is not None:
            await close_quietly(self._client.close, self.context.logger, "the Discord client")

    async def status_lines(self) -> list[str]:
        """What ``doctor`` and ``/status`` show: the bot and whom it serves."""
        if self._client is None:
            return [f"not set up: {TOKEN_SECRET} is not set (`main.py setup` asks for it)"]
        if self.auth_error is not None:
            return [self.auth_error]
        me = self._client.user
        who = f"the bot {me} (id {me.id})" if me is not None else "the bot (not reached yet)"
        config, paired = self._cfg(), self.pairings.admitted if self.pairings else set()
        users = len({str(i) for i in config.allowed_user_ids} | paired)
        return [f"{who}: {users} user(s), {len(config.allowed_channel_ids)} channel(s) served"]

    async def _login(self) -> bool:
        """``GET /users/@me`` and ``GET /gateway/bot``: a rejected token fails the
        extension; an unreachable API does not (the background task keeps trying)."""
        client, _ = self._parts()
        assert self._token is not None
        try:
            async with asyncio.timeout(VERIFY_TIMEOUT_S):
                if not self._logged_in:
                    await client.login(self._token)
                    self._logged_in = True
                _, url, _ = await client.http.get_bot_gateway()
        except discord.LoginFailure:
            self.auth_error = REJECTED
            raise DiscordSetupError(REJECTED) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            if not self._logged_in:  # the next try logs in with a session of its own
                await client.http.close()
            self.context.logger.warning(
                "cannot reach the Discord API (%s); retrying in the background",
                str(exc) or type(exc).__name__,
            )
            return False
        use_gateway(url)
        self.auth_error = None
        self.context.logger.info("connected to Discord as %s", client.user)
        return True

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        """Log in (until it works), then hold the gateway connection."""
        client, _ = self._parts()
        delays = CONNECT_BACKOFF.delays()
        while True:
            if await self._login():
                break
            await asyncio.sleep(delays.next())
        try:
            await client.connect(reconnect=True)
        except discord.LoginFailure:
            self.auth_error = REJECTED
            raise DiscordSetupError(REJECTED) from None

    async def _on_message(self, message: discord.Message) -> None:
        """Journal an allowed user's DM or mention, addressed to where it came from;
        a stranger's DM gets a pairing code; everything else is dropped."""
        client, targets = self._parts()
        author, me = message.author, client.user
        if author.bot or me is None or author.id == me.id:
            return
        direct = isinstance(message.channel, discord.DMChannel)
        if direct:
            self._send().remember_dm(author.id, message.channel.id)
        elif not _mentions(message, me.id) or not targets.serves_channel(message.channel.id):
            return
        if not targets.admits(author.id, str(author)):
            if direct:
                await self._offer_pairing(author.id)
            return
        text = message.content if direct else _without_mention(message.content, me.id)
        if not text.strip() and not message.attachments:
            self.context.logger.info("ignoring a message without text from %d", author.id)
            return
        address = str(author.id) if direct else str(message.channel.id)
        typed_for = (
            self._questions().take_typed_answer(message.channel.id, author.id)
            if text.strip()
            else None
        )
        if typed_for is not None:  # the owner's next message answers a free-text question
            await self._answer(typed_for.id, text, address, str(author.id))
            if typed_for.kind == "secret" and not direct:  # not left readable there
                try:
                    await message.delete()
                except discord.DiscordException as exc:
                    self.context.logger.warning("a secret answer stays in the channel: %s", exc)
            return
        refuse = self._refuser(address)
        files = await keep_attachments(self.context, message, str(author.id), refuse)
        if not text.strip() and not files:
            return
        await self.context.on_user_message(
            text,
            address,
            message_id=str(message.id),
            idempotency_key=f"discord:{message.id}",
            sender_id=str(author.id),
            files=files,
        )

    def _refuser(self, address: str) -> Callable[[str], Awaitable[object]]:
        """Tells ``address`` why a file it sent was not taken."""
        return lambda note: self._send().send_text(self._parts()[1].target(address), note)

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        await self._questions().on_press(interaction, self._answer)

    async def _offer_pairing(self, user_id: int) -> None:
        """A stranger's DM: a one-time code for the owner's ``/pair``, once while it
        lives, and nothing else."""
        assert self.pairings is not None
        text = self.pairings.invite(str(user_id))
        if text is None:
            return
        self.context.logger.info("Discord user %d was given a pairing code", user_id)
        await self._send().send_text(Target("dm", user_id), text)

    async def greet(self, sender_id: str) -> None:
        """The owner's ``/pair`` admitted this user: they are told so."""
        await self._send().send_text(Target("dm", int(sender_id)), WELCOME)

    async def _answer(self, request_id: str, value: str, address: str, sender: str) -> None:
        await self.context.answer_request(request_id, value, address, sender_id=sender)

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        await self._send().send_text(self._parts()[1].target(user_id), message)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A file a tool returned (ADR 0096): a message with it attached."""
        await send_file(self._send(), self._parts()[1].target(user_id), file)

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: ``default_user_id``'s DM, else the
        first allowed user's."""
        await self._send().send_text(self._parts()[1].default_target(), message)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self._questions().ask(user_id, request)

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        await self._questions().close(user_id, request_id, outcome)

    # ------------------------------------------------------------ setup

    def running_as(self) -> str | None:
        me = self._client.user if self._client is not None else None
        return str(me) if me else None

    def new_setup(self) -> DiscordSetup:
        config = self._cfg()
        return DiscordSetup(
            TOKEN_SECRET,
            self.context.get_secret(TOKEN_SECRET),
            config.api_base_url,
            [str(i) for i in config.allowed_user_ids],
        )

    # ------------------------------------------------------------ accessors

    def _cfg(self) -> DiscordConfig:
        assert self._config is not None, "initialize() was not called"
        return self._config

    def _parts(self) -> tuple[discord.Client, Targets]:
        assert self._client and self._targets, "initialize() was not called"
        return self._client, self._targets

    def _send(self) -> Sender:
        assert self._sender is not None, "initialize() was not called"
        return self._sender

    def edited_stream(self) -> StreamPresenter:
        assert self._stream is not None, "initialize() was not called"
        return self._stream

    def _questions(self) -> QuestionBoard:
        assert self._board is not None, "initialize() was not called"
        return self._board


def _mentions(message: discord.Message, bot_id: int) -> bool:
    """Whether a guild message mentions the bot (``<@id>`` in its text or its mentions)."""
    return bot_id in message.raw_mentions or any(u.id == bot_id for u in message.mentions)


def _without_mention(text: str, bot_id: int) -> str:
    """The text with the bot's own mention(s) taken out."""
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()
