"""Telegram channel: Hearth on the user's phone (SPEC §5, ADR 0005).

A ``ServiceProvider`` whose background loop long-polls the Bot API
(``polling``), a ``ChannelProvider`` for replies and proactive messages
(``sender``), and a ``StreamingChannelProvider`` that edits one message as
the reply grows (``streaming``). Only allow-listed users are served, in
private chats and in opted-in groups (``allowlist``); an update is
acknowledged only after its ``user.message`` is journaled. The kernel's user
id is the chat's id, so conversations are keyed by chat and replies go back
to the chat a message came from (``chats``, ADR 0017). Each message carries
its sender, so only the member who asked can answer the questions it leads
to. An ``InteractiveChannel``: questions get an inline keyboard answered by a
button press (``questions``, ADR 0021). A ``SetupProvider``: ``main.py setup``
asks for the bot token and the allow-list through it (``setup``, ADR 0053).
"""

from __future__ import annotations

import asyncio
import re
from functools import partial
from pathlib import Path

from telegram import Bot, BotCommand, Message, Update, User
from telegram.error import InvalidToken, NetworkError, TelegramError

from core.extensions.contract import ExtensionContext, KeptFile, UserRequest
from core.extensions.sdk import WELCOME, ChatChannel, close_quietly, keep_path

from .allowlist import AllowList
from .chats import ChatTargets
from .config import TelegramConfig, parse_config
from .incoming import fetch_file, file_url_of, incoming_file
from .polling import Poller
from .questions import QuestionBoard
from .sender import Sender
from .setup import TelegramSetup
from .streaming import StreamPresenter

TOKEN_SECRET = "TELEGRAM_BOT_TOKEN"
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
VERIFY_TIMEOUT_S = 6.0
COMMANDS_TIMEOUT_S = 10.0
_COMMAND_NAME_RE = re.compile(r"^[a-z0-9_]{1,32}$")  # what Telegram accepts
_START_RE = re.compile(r"^/start(@\S+)?(\s.*)?$", re.DOTALL)
_ADDRESSED_RE = re.compile(r"^/[A-Za-z][\w-]*@(\S+)")  # /cmd@some_bot
PRIVATE = "private"
REJECTED = f"Telegram rejected {TOKEN_SECRET} (Unauthorized); get a valid token from @BotFather"


class TelegramSetupError(Exception):
    """The channel cannot run: no token, or Telegram refuses it."""


class TelegramChannel(ChatChannel):
    def __init__(self) -> None:
        self._config: TelegramConfig | None = None
        self._bot: Bot | None = None
        self._allow: AllowList | None = None
        self._chats: ChatTargets | None = None
        self._sender: Sender | None = None
        self._stream: StreamPresenter | None = None
        self._board: QuestionBoard | None = None
        self._commands_registered = False

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        token = context.get_secret(TOKEN_SECRET)
        config = self._config = parse_config(context.get_config)
        if not token:
            return  # only the setup loads it so (a normal start skips it): start() refuses
        base_url = config.api_base_url or DEFAULT_BASE_URL
        bot = self._bot = Bot(token, base_url=base_url, base_file_url=file_url_of(base_url))
        log = context.logger
        pairings = await self.open_pairings(context.data_dir, label="Telegram", prefix="telegram")
        self._allow = AllowList(
            frozenset(config.allowed_user_ids),
            config.allowed_group_chat_ids,
            log,
            pairings.admitted,
        )
        self._chats = ChatTargets(config, pairings.admitted)
        self._sender = Sender(bot, log)
        self._stream = StreamPresenter(
            self._sender, self._chats, log, interval_s=config.edit_interval_s
        )
        self._board = QuestionBoard(bot, self._sender, self._chats, self._allow, log)
        await self._verify_token()

    async def start(self) -> None:
        if self._bot is None:
            raise TelegramSetupError(f"{TOKEN_SECRET} not set (`main.py setup` asks for it)")
        await super().start()
        self._parts()[1].announce()
        if self.auth_error is not None:
            await self._verify_token()

    async def destroy(self) -> None:
        await super().destroy()
        if self._bot is not None:
            await close_quietly(self._bot.shutdown, self.context.logger, "the Telegram client")

    async def _verify_token(self) -> None:
        """``getMe``: a rejected token fails the extension; an unreachable API does not."""
        bot, _, _ = self._parts()
        try:
            async with asyncio.timeout(VERIFY_TIMEOUT_S):
                await bot.initialize()
        except InvalidToken:
            self.auth_error = REJECTED
            raise TelegramSetupError(REJECTED) from None
        except (NetworkError, TimeoutError) as exc:
            self.context.logger.warning(
                "cannot reach the Telegram Bot API (%s); polling keeps retrying",
                str(exc) or type(exc).__name__,
            )
            return
        self.auth_error = None
        self.context.logger.info("connected to Telegram as @%s", bot.username)

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        bot, _, _ = self._parts()
        poller = Poller(
            bot,
            self._on_update,
            self.context.logger,
            timeout_s=self._cfg().poll_timeout_s,
            before_poll=self._register_commands,
        )
        try:
            await poller.run()
        except InvalidToken:
            self.auth_error = REJECTED
            raise TelegramSetupError(REJECTED) from None

    async def _on_update(self, update: Update) -> None:
        """Journal an allowed user's text, addressed to the chat it came from;
        everything else is acknowledged and dropped."""
        bot, allow, chats = self._parts()
        if update.callback_query is not None:
            await self._questions().on_press(update.callback_query, self._answer)
            return
        message = update.message
        if message is None or message.from_user is None:
            return
        user, chat = message.from_user, message.chat
        group = chat.type != PRIVATE
        if group and not allow.admits_group(chat.id, chat.title or chat.type):
            return
        if not allow.admits(user.id, _describe(user)):
            if not group:
                await self._offer_pairing(user.id)
            return
        if message.text is None:
            await self._on_file(message, chats.address(chat.id), update.update_id)
            return
        if group and _for_another_bot(message.text, _username(bot)):
            return
        typed_for = self._questions().take_typed_answer(chat.id, user.id)
        if typed_for is not None:  # the owner's next message answers a free-text question
            await self._answer(typed_for.id, message.text, chats.address(chat.id), str(user.id))
            if typed_for.kind == "secret":  # not left readable in the chat
                try:
                    await message.delete()
                except TelegramError as exc:
                    self.context.logger.warning("a secret answer stays in the chat: %s", exc)
            return
        text = "/help" if _START_RE.match(message.text) else message.text
        await self.context.on_user_message(
            text,
            chats.address(chat.id),
            message_id=str(message.message_id),
            idempotency_key=f"telegram:{update.update_id}",
            sender_id=str(user.id),
        )

    async def _on_file(self, message: Message, address: str, update_id: int) -> None:
        """A photo, a document or a voice note (ADR 0096): kept for its person, then
        journaled with its caption; one over ``files.max_bytes`` is refused in the chat
        with the limit named. Anything else (a sticker, a location) is ignored."""
        sender = str(message.from_user.id) if message.from_user else address
        got = incoming_file(message)
        if got is None:
            self.context.logger.info("ignoring a message with no text or file from %s", sender)
            return
        name, mime_type, file_id = got
        try:
            path = await fetch_file(self._parts()[0], file_id, self.context.data_dir, name)
        except TelegramError as exc:  # "file is too big" (Bot API: 20 MB) among them
            await self._send().send_text(message.chat.id, f"I could not take {name}: {exc}")
            return
        refuse = partial(self._send().send_text, message.chat.id)
        file_id = await keep_path(self.context, sender, name, mime_type, path, refuse)  # its person
        if file_id is None:
            return
        await self.context.on_user_message(
            message.caption or "",
            address,
            message_id=str(message.message_id),
            idempotency_key=f"telegram:{update_id}",
            sender_id=sender,
            files=[file_id],
        )

    async def _offer_pairing(self, user_id: int) -> None:
        """A stranger's private message: a one-time code for the owner's ``/pair``,
        once while it lives, and nothing else."""
        assert self.pairings is not None
        text = self.pairings.invite(str(user_id))
        if text is None:
            return
        self.context.logger.info("Telegram user %d was given a pairing code", user_id)
        await self._send().send_text(user_id, text)

    async def greet(self, sender_id: str) -> None:
        """The owner's ``/pair`` admitted this user: they are told so."""
        await self._send().send_text(int(sender_id), WELCOME)

    async def _answer(self, request_id: str, value: str, address: str, sender: str) -> None:
        await self.context.answer_request(request_id, value, address, sender_id=sender)

    async def _register_commands(self) -> None:
        """``setMyCommands`` with the kernel's commands, once per process; retried
        before each poll until it works."""
        if self._commands_registered:
            return
        commands = [
            (name, description[:256] or name)
            for name, description in await self.context.list_commands()
            if _COMMAND_NAME_RE.match(name)
        ]
        if not commands:
            return
        try:
            async with asyncio.timeout(COMMANDS_TIMEOUT_S):
                await self._parts()[0].set_my_commands([BotCommand(n, d) for n, d in commands])
        except (TelegramError, TimeoutError) as exc:
            self.context.logger.warning("setMyCommands failed (%s); will retry", exc)
            return
        self._commands_registered = True

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        await self._send().send_text(self._parts()[2].chat_for(user_id), message)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A file a tool returned (ADR 0096): a picture as a photo, else a document."""
        data = await asyncio.to_thread(Path(file.path).read_bytes)
        chat = self._parts()[2].chat_for(user_id)
        await self._send().send_file(chat, file.name, data, file.caption, photo=file.is_image)

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: ``default_chat_id``, else the first
        allowed user's private chat."""
        await self._send().send_text(self._parts()[2].default_chat(), message)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self._questions().ask(user_id, request)

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        await self._questions().close(user_id, request_id, outcome)

    # ------------------------------------------------------------ setup

    def running_as(self) -> str | None:
        return _username(self._bot) if self._bot is not None else None

    def new_setup(self) -> TelegramSetup:
        config = self._cfg()
        return TelegramSetup(
            TOKEN_SECRET,
            self.context.get_secret(TOKEN_SECRET),
            config.api_base_url or DEFAULT_BASE_URL,
            list(config.allowed_user_ids),
        )

    # ------------------------------------------------------------ accessors

    def _cfg(self) -> TelegramConfig:
        assert self._config is not None, "initialize() was not called"
        return self._config

    def _parts(self) -> tuple[Bot, AllowList, ChatTargets]:
        assert self._bot and self._allow and self._chats, "initialize() was not called"
        return self._bot, self._allow, self._chats

    def _send(self) -> Sender:
        assert self._sender is not None, "initialize() was not called"
        return self._sender

    def edited_stream(self) -> StreamPresenter:
        assert self._stream is not None, "initialize() was not called"
        return self._stream

    def _questions(self) -> QuestionBoard:
        assert self._board is not None, "initialize() was not called"
        return self._board


def _username(bot: Bot) -> str | None:
    """The bot's @name, or ``None`` while ``getMe`` has not succeeded yet."""
    try:
        return bot.username
    except RuntimeError:
        return None


def _for_another_bot(text: str, username: str | None) -> bool:
    """``/cmd@other_bot`` in a group is meant for another bot (unknown name: ours)."""
    match = _ADDRESSED_RE.match(text)
    if match is None or not username:
        return False
    return match.group(1).lower() != username.lower()


def _describe(user: User) -> str:
    name = f"@{user.username}" if user.username else user.full_name
    return f"{name}, {user.full_name}" if user.username else name
