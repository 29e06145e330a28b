"""What comes in over Socket Mode, and the connection it comes in on.

``SocketLink`` runs slack-bolt's ``AsyncApp`` (``process_before_response``:
an envelope's acknowledgement is sent only when its listener returned, so a
message is journaled before Slack hears it arrived) behind an
``AsyncSocketModeHandler``; the first websocket URL is asked for with
backoff, and slack_sdk's client connects and reconnects by itself afterwards.
An invalid app-level token is raised, nothing to retry. Every envelope is acknowledged once
handled — ignored ones too — except when journaling failed: then Slack sends
it again.

``Inbox`` decides what an event is: a DM (``message`` with ``channel_type``
``im``, no subtype, not from a bot) from an allowed or paired user, or a
mention (``app_mention``) by one in a listed channel, is journaled with
``slack:<event_id>`` as its idempotency key (a redelivered envelope carries
the same ``event_id``); a stranger's DM is offered a pairing code instead; a
stranger's mention, edits, joins and the bot's own messages are dropped.
Events are journaled one at a time, in the order they arrived, so one
conversation's messages keep their order.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from core.extensions.contract import ExtensionContext
from core.extensions.sdk import Backoff

from .files import keep_shared
from .questions import ACTION_PREFIX, QuestionBoard
from .sender import Sender, error_code
from .targets import Targets, address_of

CONNECT_BACKOFF = Backoff(1.0, 30.0)
_LEADING_MENTIONS = re.compile(r"^\s*(<@[A-Z0-9]+>[\s,:]*)+")
_REFUSED_APP_TOKEN = ("invalid_auth", "not_authed", "not_allowed_token_type")

OfferPairing = Callable[[str, str], Awaitable[None]]  # user id, DM channel id


def _env_token_note(record: logging.LogRecord) -> bool:
    """Drop bolt's note that the client's token wins over ``SLACK_BOT_TOKEN`` from the
    environment: the two are the same secret here, so the note would only alarm."""
    return "`token` will be unused" not in record.getMessage()


class SlackAppTokenError(Exception):
    """Slack refuses the app-level token (``apps.connections.open``)."""


class Inbox:
    """Turns Slack events into journaled messages, answers and pairing offers."""

    def __init__(
        self,
        context: ExtensionContext,
        targets: Targets,
        sender: Sender,
        board: QuestionBoard,
        offer_pairing: OfferPairing,
    ) -> None:
        self._ctx = context
        self._targets = targets
        self._sender = sender
        self._board = board
        self._offer_pairing = offer_pairing
        self._order = asyncio.Lock()

    async def on_message(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """A ``message`` event: only a person's DM (text, files shared) counts."""
        if event.get("channel_type") != "im" or event.get("bot_id"):
            return
        if event.get("subtype") not in (None, "file_share"):
            return
        user, channel = str(event.get("user", "")), str(event.get("channel", ""))
        if not user or not channel:
            return
        self._sender.remember_dm(user, channel)
        if not self._targets.admits(user):
            await self._offer_pairing(user, channel)
            return
        await self._take(body, event, user, user)

    async def on_mention(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """An ``app_mention``: an allowed user in a listed channel (or thread)."""
        user, channel = str(event.get("user", "")), str(event.get("channel", ""))
        if not user or event.get("bot_id"):
            return
        if not self._targets.admits_channel(channel) or not self._targets.admits(user):
            return
        await self._take(body, event, address_of(channel, event.get("thread_ts")), user)

    async def on_press(self, body: dict[str, Any], respond: Any) -> None:
        """A button under a question: answered in place, or told why not (only to them)."""
        note = await self._board.on_press(body, self._answer)
        if note is not None:
            try:
                await respond(text=note, response_type="ephemeral", replace_original=False)
            except Exception as exc:  # the note is a courtesy: the press changed nothing
                self._ctx.logger.debug("could not tell the presser %r: %s", note, exc)

    async def _take(
        self, body: dict[str, Any], event: dict[str, Any], address: str, user: str
    ) -> None:
        text = _LEADING_MENTIONS.sub("", str(event.get("text") or "")).strip()
        shared = [f for f in event.get("files") or [] if isinstance(f, dict)]
        if not text and not shared:
            self._ctx.logger.info("ignoring a Slack message without text from %s", user)
            return
        async with self._order:
            typed_for = self._board.take_typed_answer(address, user) if text else None
            if typed_for is not None:  # the owner's next message answers a free-text question
                await self._answer(typed_for.id, text, address, user)
                return
            files = await self._keep(shared, address, user)
            if not text and not files:
                return
            event_id = body.get("event_id") or event.get("client_msg_id") or event.get("ts")
            await self._ctx.on_user_message(
                text,
                address,
                message_id=str(event.get("ts", "")),
                idempotency_key=f"slack:{event_id}",
                sender_id=user,
                files=files,
            )

    async def _keep(self, shared: list[dict[str, Any]], address: str, user: str) -> list[str]:
        """The files shared with a message, kept (ADR 0096); refusals told there."""
        if not shared:
            return []
        target = self._targets.target(address)
        token = str(self._sender.client.token or "")
        return await keep_shared(
            self._ctx, token, shared, user, lambda note: self._sender.send_text(target, note)
        )

    async def _answer(self, request_id: str, value: str, address: str, sender: str) -> None:
        await self._ctx.answer_request(request_id, value, address, sender_id=sender)


class SocketLink:
    """The Socket Mode connection and the bolt app behind it."""

    def __init__(
        self, client: AsyncWebClient, app_token: str, inbox: Inbox, logger: logging.Logger
    ) -> None:
        self._client = client
        self._app_token = app_token
        self._inbox = inbox
        self._log = logger

    def app(self) -> AsyncApp:
        """The bolt app: our listeners, then catch-alls that acknowledge the rest."""
        bolt_log = self._log.getChild("bolt")
        bolt_log.addFilter(_env_token_note)
        app = AsyncApp(
            client=self._client,
            logger=bolt_log,
            process_before_response=True,
            request_verification_enabled=False,
            url_verification_enabled=False,
            ssl_check_enabled=False,
        )
        inbox = self._inbox

        @app.event("message")
        async def message(body: dict[str, Any], event: dict[str, Any]) -> None:
            await inbox.on_message(body, event)

        @app.event("app_mention")
        async def mention(body: dict[str, Any], event: dict[str, Any]) -> None:
            await inbox.on_mention(body, event)

        @app.action(re.compile(f"^{ACTION_PREFIX}"))
        async def press(ack: Any, body: dict[str, Any], respond: Any) -> None:
            await ack()
            await inbox.on_press(body, respond)

        @app.event(re.compile(".*"))
        async def other_event() -> None:
            return None

        @app.action(re.compile(".*"))
        async def other_action(ack: Any) -> None:
            await ack()

        return app

    async def run(self) -> None:
        """Connect, retrying until it works, and stay connected until cancelled.

        The websocket URL is asked for here (``apps.connections.open``) so that a
        refused app-level token is raised at once: slack_sdk's own ``connect`` would
        retry it forever. Reaching the URL is then slack_sdk's job, reconnecting too.
        """
        handler = AsyncSocketModeHandler(self.app(), self._app_token, logger=self._log)
        socket = handler.client
        failures = CONNECT_BACKOFF.delays()
        try:
            while socket.wss_uri is None:
                try:
                    socket.wss_uri = await socket.issue_new_wss_url()
                    break
                except SlackApiError as exc:
                    code = error_code(exc)
                    if code in _REFUSED_APP_TOKEN:
                        raise SlackAppTokenError(
                            f"Slack rejected SLACK_APP_TOKEN (apps.connections.open: {code}); "
                            "it is the app-level token (xapp-...) with connections:write"
                        ) from None
                    reason = code or str(exc)
                except (ClientError, OSError, TimeoutError) as exc:
                    reason = str(exc) or type(exc).__name__
                delay = failures.next()
                self._log.warning("cannot open Socket Mode (%s); retrying in %.1f s", reason, delay)
                await asyncio.sleep(delay)
            await handler.connect_async()
            self._log.info("Slack Socket Mode connected")
            await asyncio.Event().wait()
        finally:
            await handler.close_async()
