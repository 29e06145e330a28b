"""Slack channel: Hearth in a Slack workspace (issue 48, ADR 0095).

A ``ServiceProvider`` whose background task holds a Socket Mode connection
(slack-bolt's ``AsyncApp`` with ``AsyncSocketModeHandler``, aiohttp), so no
public URL is needed (``socket``). Direct messages (``message.im``) and
mentions (``app_mention``) in listed channels from allowed or paired users
become ``user.message`` events; an envelope is acknowledged only after its
message is journaled, with the event's ``event_id`` as idempotency key, so a
redelivery (Slack's after a missed acknowledgement, or after a restart) is
journaled once. A ``ChannelProvider`` for replies and proactive messages, a
``StreamingChannelProvider`` that edits one message as the reply grows
(``streaming``), an ``InteractiveChannel`` whose questions are Block Kit
buttons (``questions``). Each DM, channel and thread is its own conversation
(``targets``). A stranger's DM gets a pairing code and nothing else; the
owner's ``/pair CODE`` admits them (``core.extensions.sdk.Pairings``). A
``SetupProvider``: ``main.py setup`` asks for the tokens, checked live
(``setup``); a ``StatusReporter``: ``doctor`` shows whom the bot is.
"""

from __future__ import annotations

import asyncio
import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from core.extensions.contract import ExtensionContext, KeptFile, UserRequest
from core.extensions.sdk import WELCOME, ChatChannel

from .config import SlackConfig, parse_config
from .files import send_file
from .inbox import Inbox, SlackAppTokenError, SocketLink
from .questions import QuestionBoard
from .sender import Sender, error_code
from .setup import SlackSetup
from .streaming import StreamPresenter
from .targets import Target, Targets

BOT_SECRET = "SLACK_BOT_TOKEN"
APP_SECRET = "SLACK_APP_TOKEN"
DEFAULT_BASE_URL = "https://slack.com/api/"
VERIFY_TIMEOUT_S = 6.0
REJECTED = f"Slack rejected {BOT_SECRET} (auth.test: {{}}); copy the Bot User OAuth Token again"


class SlackSetupError(Exception):
    """The channel cannot run: no tokens, or Slack refuses them."""


def web_client(
    token: str, base_url: str, logger: logging.Logger, *, retries: bool
) -> AsyncWebClient:
    """A Web API client; with ``retries``, Slack's ``429 Retry-After`` is waited out
    (up to 5 times), connection errors and 5xx answers retried a few times."""
    handlers = (
        [
            AsyncRateLimitErrorRetryHandler(max_retry_count=5),
            AsyncConnectionErrorRetryHandler(max_retry_count=3),
            AsyncServerErrorRetryHandler(max_retry_count=2),
        ]
        if retries
        else []
    )
    return AsyncWebClient(
        token=token, base_url=base_url, logger=logger, retry_handlers=handlers, timeout=30
    )


class SlackChannel(ChatChannel):
    """The Slack channel extension: its parts are built in ``initialize`` once both
    tokens are there; without them only the setup can use it."""

    def __init__(self) -> None:
        self._config: SlackConfig | None = None
        self._client: AsyncWebClient | None = None
        self._app_token: str | None = None
        self._targets: Targets | None = None
        self._sender: Sender | None = None
        self._stream: StreamPresenter | None = None
        self._board: QuestionBoard | None = None
        self._identity: str | None = None  # "@hearth in Team" once auth.test worked
        self._app_error: str | None = None  # the app-level token refused by the socket

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        config = self._config = parse_config(context.get_config)
        bot_token, app_token = context.get_secret(BOT_SECRET), context.get_secret(APP_SECRET)
        if not bot_token or not app_token:
            return  # only the setup loads it so (a normal start skips it): start() refuses
        log = context.logger
        base_url = config.api_base_url or DEFAULT_BASE_URL
        self._app_token = app_token
        client = self._client = web_client(bot_token, base_url, log, retries=True)
        preview = web_client(bot_token, base_url, log, retries=False)
        pairings = await self.open_pairings(context.data_dir, label="Slack", prefix="slack")
        targets = self._targets = Targets(config, log, pairings.admitted)
        sender = self._sender = Sender(client, preview, log)
        self._stream = StreamPresenter(sender, targets, log, interval_s=config.edit_interval_s)
        self._board = QuestionBoard(sender, targets, log)
        await self._verify_token()

    async def start(self) -> None:
        if self._client is None:
            raise SlackSetupError(
                f"{BOT_SECRET} and {APP_SECRET} not both set (`main.py setup` asks for them)"
            )
        await super().start()
        self._app_error = None  # the socket tries the app-level token again
        self._parts()[0].announce()
        if self.auth_error is not None:
            await self._verify_token()

    def health_check(self) -> bool:
        return super().health_check() and self._app_error is None

    async def status_lines(self) -> list[str]:
        """For ``doctor`` and ``/status``: whom the bot is, and whom it serves."""
        if self._client is None:
            return []
        if self._identity is None:
            try:
                await self._verify_token()
            except SlackSetupError as exc:
                return [str(exc)]
        who = self._identity or "not reached yet (auth.test failed)"
        config = self._cfg()
        served = len(config.allowed_user_ids) + len(self._parts()[0].paired)
        lines = [f"bot {who}; {served} user(s), {len(config.allowed_channel_ids)} channel(s)"]
        return lines + ([self._app_error] if self._app_error else [])

    async def _verify_token(self) -> None:
        """``auth.test``: a rejected token fails the extension; an unreachable API does not."""
        client = self._client
        assert client is not None
        try:
            async with asyncio.timeout(VERIFY_TIMEOUT_S):
                me = await client.auth_test()
        except SlackApiError as exc:
            code = error_code(exc)
            if code in ("invalid_auth", "not_authed", "account_inactive", "token_revoked"):
                self.auth_error = REJECTED.format(code)
                raise SlackSetupError(self.auth_error) from None
            self.context.logger.warning("auth.test failed (%s); will retry", code or exc)
            return
        except (OSError, TimeoutError) as exc:
            self.context.logger.warning(
                "cannot reach the Slack Web API (%s); the socket keeps retrying",
                str(exc) or type(exc).__name__,
            )
            return
        self.auth_error = None
        self._identity = f"@{me.get('user')} in {me.get('team')}"
        self.context.logger.info("connected to Slack as %s", self._identity)

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        assert self._client is not None and self._app_token is not None
        targets, sender = self._parts()
        inbox = Inbox(self.context, targets, sender, self._questions(), self._offer_pairing)
        link = SocketLink(self._client, self._app_token, inbox, self.context.logger)
        try:
            await link.run()
        except SlackAppTokenError as exc:
            self._app_error = str(exc)  # unhealthy: the supervisor shows it and retries
            raise

    async def _offer_pairing(self, user: str, channel: str) -> None:
        """A stranger's DM: a one-time code for the owner's ``/pair``, once while it
        lives, and nothing else."""
        assert self.pairings is not None
        text = self.pairings.invite(user)
        if text is None:
            return
        self.context.logger.info("Slack user %s was given a pairing code", user)
        await self._send().post(Target(channel=channel), text, markup=False)

    async def greet(self, sender_id: str) -> None:
        """The owner's ``/pair`` admitted this user: they are told so, in their DM."""
        await self._send().send_text(Target(user=sender_id), WELCOME)

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        await self._send().send_text(self._parts()[0].target(user_id), message)

    async def send_file(self, user_id: str, file: KeptFile) -> None:
        """A file a tool returned (ADR 0096): uploaded and shared there."""
        await send_file(self._send(), self._parts()[0].target(user_id), file)

    async def send_message(self, message: str) -> None:
        """A proactive message with no address: ``default_address``, else the first
        allowed user's DM."""
        targets = self._parts()[0]
        await self._send().send_text(targets.target(targets.default_address()), message)

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        await self._questions().ask(user_id, request)

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        await self._questions().close(request_id, outcome)

    # ------------------------------------------------------------ setup

    def running_as(self) -> str | None:
        return self._identity

    def new_setup(self) -> SlackSetup:
        ctx, config = self.context, self._cfg()
        return SlackSetup(
            (BOT_SECRET, APP_SECRET),
            (ctx.get_secret(BOT_SECRET), ctx.get_secret(APP_SECRET)),
            config.api_base_url or DEFAULT_BASE_URL,
            list(config.allowed_user_ids),
        )

    # ------------------------------------------------------------ accessors

    def _cfg(self) -> SlackConfig:
        assert self._config is not None, "initialize() was not called"
        return self._config

    def _parts(self) -> tuple[Targets, Sender]:
        assert self._targets and self._sender, "initialize() was not called"
        return self._targets, self._sender

    def _send(self) -> Sender:
        return self._parts()[1]

    def edited_stream(self) -> StreamPresenter:
        assert self._stream is not None, "initialize() was not called"
        return self._stream

    def _questions(self) -> QuestionBoard:
        assert self._board is not None, "initialize() was not called"
        return self._board
