"""A fake Discord (REST API and gateway websocket) on 127.0.0.1, for real tests through discord.py.

aiohttp in a background thread with its own event loop, so it serves
in-process async tests and kernels started as subprocesses alike
(``api_base_url = fake.base_url``)::

    with FakeDiscord() as dc:
        dc.wait_until(dc.is_connected)                   # the bot is on the gateway
        dc.send_dm("hi", user_id=42)                    # a user writes a DM
        assert dc.wait_until(lambda: dc.dm_texts(42)) == ["echo: hi"]

What discord.py needs is implemented: ``GET /users/@me`` (401 for another
token), ``GET /gateway/bot``, the gateway (HELLO, IDENTIFY → READY, heartbeat →
ACK, RESUME → INVALID_SESSION, then ``MESSAGE_CREATE`` and ``INTERACTION_CREATE``
dispatches), DM channels, ``POST`` (JSON or multipart with files: ``uploads``) /
``PATCH`` / ``DELETE`` of messages, typing, interaction callbacks (``press``,
``submit_form``) and attachments a person sends (``send_dm_file``). Like Discord
it refuses texts over 2,000 characters and empty messages (400); ``fail_next``
scripts errors such as a 429; ``hold_sends`` makes sends hang (``drop_held``
drops them). Every REST call is recorded (``calls``) with its time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from support.discord_files import Upload, attachment_json, read_body
from support.discord_payloads import (
    APPLICATION_ID,
    BOT_ID,
    GUILD_ID,
    check_content,
    error,
    interaction_json,
    json_response,
    now,
    text_fields,
    user_json,
)

__all__ = ["BOT_ID", "TOKEN", "Call", "Failure", "FakeDiscord"]

TOKEN = "fake-discord-token.abc.def"
ALICE_OWNER = 310_000_000_000_000_001  # the application's owner in the developer portal
HELLO, IDENTIFY, HEARTBEAT, RESUME, INVALID_SESSION, DISPATCH, HEARTBEAT_ACK = 10, 2, 1, 6, 9, 0, 11


@dataclass(frozen=True)
class Call:
    method: str
    path: str  # without the /api/v10 prefix, e.g. /channels/5/messages
    body: dict[str, Any]
    at: float  # time.monotonic()


@dataclass(frozen=True)
class Failure:
    status: int = 429
    retry_after: float = 0.5
    message: str = "You are being rate limited."


@dataclass
class Message:
    channel_id: int
    id: int
    content: str
    author_id: int
    edits: list[str] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    deleted: bool = False
    uploads: list[Upload] = field(default_factory=list)

    @property
    def buttons(self) -> list[tuple[str, str]]:
        """(label, custom id) of its buttons, row by row."""
        return [
            (b.get("label", ""), b.get("custom_id", ""))
            for row in self.components
            for b in row.get("components", [])
        ]


class FakeDiscord:
    """Context manager; ``base_url`` is the REST API base (``.../api/v10``)."""

    def __init__(self, token: str = TOKEN) -> None:
        self.token = token
        self._cond = threading.Condition()
        self._calls: list[Call] = []
        self._messages: dict[int, Message] = {}
        self._ids = itertools.count(1_000_000_000_000_000_000)
        self._dm: dict[int, int] = {}  # user id -> DM channel id
        self._sockets: list[web.WebSocketResponse] = []  # identified connections
        self._identifies = 0
        self._seq = 0
        self._replay: list[dict[str, Any]] = []  # dispatched again on each IDENTIFY
        self._failures: dict[str, deque[Failure]] = {}
        self._callbacks: list[dict[str, Any]] = []
        self._files: dict[int, bytes] = {}  # attachment id -> its bytes
        self._hold: asyncio.Event | None = None  # set: held sends are let go (and dropped)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-discord")

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeDiscord:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{id}/{name}", self._attachment)
        app.router.add_route("*", "/api/v10/{path:.*}", self._rest)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/gateway"

    # ------------------------------------------------------------ the test's side

    def is_connected(self) -> bool:
        """Whether a client has identified and is on the gateway now."""
        with self._cond:
            return bool(self._sockets)

    @property
    def identifies(self) -> int:
        with self._cond:
            return self._identifies

    def dm_channel(self, user_id: int) -> int:
        """The DM channel between the bot and ``user_id`` (made on first use)."""
        with self._cond:
            return self._dm.setdefault(user_id, next(self._ids))

    def send_dm(self, text: str, *, user_id: int, replay: bool = False) -> int:
        """``user_id`` writes ``text`` to the bot in a DM; the message id. ``replay``:
        the gateway sends it again on every later IDENTIFY too (a restart that
        resumed the session, as far as this message is concerned)."""
        return self._user_message(text, user_id, self.dm_channel(user_id), None, replay)

    def send_dm_file(
        self, data: bytes, name: str, kind: str, *, user_id: int, text: str = ""
    ) -> int:
        """``user_id`` sends a file (with ``text``, or none) to the bot in a DM."""
        self._files[number := next(self._ids)] = data
        url = f"{self.base_url.removesuffix('/api/v10')}/attachments/{number}/{name}"
        files = [attachment_json(number, name, kind, len(data), url)]
        return self._user_message(text, user_id, self.dm_channel(user_id), None, False, files)

    def send_channel(
        self, text: str, *, user_id: int, channel_id: int, mention: bool = True
    ) -> int:
        """``user_id`` writes in a server channel, mentioning the bot unless told not to."""
        body = f"<@{BOT_ID}> {text}" if mention else text
        return self._user_message(body, user_id, channel_id, GUILD_ID, False)

    def press(self, message_id: int, label: str, *, user_id: int) -> None:
        """``user_id`` clicks the button labelled ``label`` on a message of the bot's."""
        with self._cond:
            message = self._messages[message_id]
        custom_id = next(c for lbl, c in message.buttons if lbl == label)
        self._interact(3, message, user_id, {"custom_id": custom_id, "component_type": 2})

    def submit_form(self, message_id: int, value: str, *, user_id: int) -> None:
        """``user_id`` types ``value`` into the form (modal) the bot opened last, from a
        button on ``message_id``, and submits it."""
        form = next(c["data"] for c in reversed(self.callbacks()) if c.get("type") == 9)
        fields = [
            {"type": 1, "components": [{"type": 4, "custom_id": field, "value": value}]}
            for field in text_fields(form)
        ]
        with self._cond:
            message = self._messages[message_id]
        self._interact(5, message, user_id, {"custom_id": form["custom_id"], "components": fields})

    def _interact(self, kind: int, message: Message, user_id: int, data: dict[str, Any]) -> None:
        with self._cond:
            message_json = self._message_json(message)
            guild = message.channel_id not in self._dm.values()
        payload = interaction_json(
            next(self._ids), kind, message.channel_id, guild, user_id, data, message_json
        )
        self._dispatch("INTERACTION_CREATE", payload)

    def calls(self) -> list[Call]:
        with self._cond:
            return list(self._calls)

    def calls_of(self, method: str, suffix: str) -> list[Call]:
        """The REST calls of ``method`` whose path ends with ``suffix`` (``/messages``)."""
        return [c for c in self.calls() if c.method == method and c.path.endswith(suffix)]

    def callbacks(self) -> list[dict[str, Any]]:
        """The interaction callbacks received (``{"type": 6}`` is a deferred update)."""
        with self._cond:
            return list(self._callbacks)

    def messages(self, channel_id: int) -> list[Message]:
        """The bot's messages in a channel, oldest first (deleted ones left out)."""
        with self._cond:
            return [
                m
                for m in self._messages.values()
                if m.channel_id == channel_id and m.author_id == BOT_ID and not m.deleted
            ]

    def texts(self, channel_id: int) -> list[str]:
        return [m.content for m in self.messages(channel_id)]

    def dm_texts(self, user_id: int) -> list[str]:
        """The bot's messages in its DM with ``user_id``, as they read now."""
        with self._cond:
            channel = self._dm.get(user_id)
        return [] if channel is None else self.texts(channel)

    def fail_next(self, method: str, suffix: str, *failures: Failure) -> None:
        """The next calls of ``method`` on a path ending with ``suffix`` fail so."""
        with self._cond:
            self._failures.setdefault(f"{method} {suffix}", deque()).extend(failures)

    def hold_sends(self) -> None:
        """From now on, ``POST .../messages`` hangs until ``drop_held``: the send is
        under way but never reaches Discord (a kill then lands between the two)."""
        self._hold = asyncio.Event()

    def drop_held(self) -> None:
        """Let the held sends end with a 500, stored nowhere; later sends go through."""
        hold, self._hold = self._hold, None
        if hold is not None:
            self._loop.call_soon_threadsafe(hold.set)

    def wait_until(self, condition: Callable[[], Any], timeout_s: float = 30.0) -> Any:
        """Poll ``condition`` until it is truthy; its value (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout_s} s")
            time.sleep(0.02)

    # ------------------------------------------------------------ gateway

    def _user_message(
        self,
        text: str,
        user_id: int,
        channel_id: int,
        guild_id: int | None,
        replay: bool,
        files: list[dict[str, Any]] | None = None,
    ) -> int:
        message = Message(channel_id, next(self._ids), text, user_id)
        with self._cond:
            self._messages[message.id] = message
            data = self._message_json(message) | {"attachments": files or []}
        if guild_id is not None:
            data["guild_id"] = str(guild_id)
            data["member"] = {"roles": [], "joined_at": now(), "deaf": False, "mute": False}
        if replay:
            with self._cond:
                self._replay.append(data)
        self._dispatch("MESSAGE_CREATE", data)
        return message.id

    def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(self._send_all(event, data), self._loop).result(10)

    async def _send_all(self, event: str, data: dict[str, Any]) -> None:
        for ws in list(self._sockets):
            await self._send_event(ws, event, data)

    async def _send_event(self, ws: web.WebSocketResponse, event: str, data: Any) -> None:
        self._seq += 1
        await ws.send_str(json.dumps({"op": DISPATCH, "t": event, "s": self._seq, "d": data}))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str(json.dumps({"op": HELLO, "d": {"heartbeat_interval": 41250}}))
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                op = payload.get("op")
                if op == HEARTBEAT:
                    await ws.send_str(json.dumps({"op": HEARTBEAT_ACK}))
                elif op == RESUME:
                    await ws.send_str(json.dumps({"op": INVALID_SESSION, "d": False}))
                elif op == IDENTIFY:
                    if payload["d"].get("token") != self.token:
                        await ws.close(code=4004, message=b"Authentication failed.")
                        break
                    await self._ready(ws)
        finally:
            with self._cond:
                if ws in self._sockets:
                    self._sockets.remove(ws)
        return ws

    async def _ready(self, ws: web.WebSocketResponse) -> None:
        ready = {
            "v": 10,
            "user": user_json(BOT_ID, bot=True),
            "guilds": [],
            "session_id": f"session-{next(self._ids)}",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(APPLICATION_ID), "flags": 0},
            "private_channels": [],
        }
        await self._send_event(ws, "READY", ready)
        with self._cond:
            self._sockets.append(ws)
            self._identifies += 1
            replay = list(self._replay)
        for data in replay:
            await self._send_event(ws, "MESSAGE_CREATE", data)

    # ------------------------------------------------------------ REST

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["path"]
        body, uploads = await read_body(request)
        with self._cond:
            self._calls.append(Call(request.method, path, body, time.monotonic()))
            failure = self._take_failure(request.method, path)
        webhook = path.startswith("/interactions/")  # authorised by the token in the path
        if not webhook and request.headers.get("Authorization") != f"Bot {self.token}":
            return error(401, 0, "401: Unauthorized")
        hold = self._hold
        if hold is not None and request.method == "POST" and path.endswith("/messages"):
            await hold.wait()
            return error(500, 0, "500: the send was held and dropped")
        if failure is not None:
            if failure.status == 429:
                return json_response(
                    {
                        "message": failure.message,
                        "retry_after": failure.retry_after,
                        "global": False,
                    },
                    status=429,
                    headers={"Via": "1.1 google", "Retry-After": str(failure.retry_after)},
                )
            return error(failure.status, 0, failure.message)
        return self._route(request.method, path.split("/")[1:], body, uploads)

    async def _attachment(self, request: web.Request) -> web.Response:
        data = self._files.get(int(request.match_info["id"]))
        return web.Response(status=404) if data is None else web.Response(body=data)

    def _take_failure(self, method: str, path: str) -> Failure | None:
        for key, queue in self._failures.items():
            wanted_method, _, suffix = key.partition(" ")
            if wanted_method == method and path.endswith(suffix) and queue:
                return queue.popleft()
        return None

    def _route(
        self, method: str, parts: list[str], body: dict[str, Any], uploads: list[Upload]
    ) -> web.Response:
        match method, parts:
            case "GET", ["users", "@me"]:
                return json_response(user_json(BOT_ID, bot=True))
            case "GET", ["oauth2", "applications", "@me"]:
                return json_response(
                    {
                        "id": str(APPLICATION_ID),
                        "name": "Hearth",
                        "description": "",
                        "icon": None,
                        "bot_public": False,
                        "bot_require_code_grant": False,
                        "owner": user_json(ALICE_OWNER),
                        "verify_key": "0" * 64,
                        "flags": 0,
                        "summary": "",
                    }
                )
            case "GET", ["gateway", "bot"]:
                limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
                return json_response(
                    {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
                )
            case "POST", ["users", "@me", "channels"]:
                user_id = int(body["recipient_id"])
                channel = {
                    "id": str(self.dm_channel(user_id)),
                    "type": 1,
                    "recipients": [user_json(user_id)],
                    "last_message_id": None,
                }
                return json_response(channel)
            case "POST", ["channels", channel_id, "messages"]:
                return self._post_message(int(channel_id), body, uploads)
            case "PATCH", ["channels", _, "messages", message_id]:
                return self._edit_message(int(message_id), body)
            case "DELETE", ["channels", _, "messages", message_id]:
                with self._cond:
                    if int(message_id) in self._messages:
                        self._messages[int(message_id)].deleted = True
                return web.Response(status=204)
            case "POST", ["channels", _, "typing"]:
                return web.Response(status=204)
            case "POST", ["interactions", interaction_id, _, "callback"]:
                with self._cond:
                    self._callbacks.append(body)
                reply = {"interaction": {"id": interaction_id, "type": 3}}
                return json_response(reply)
        return error(404, 0, f"404: Not Found ({method} /{'/'.join(parts)})")

    def _post_message(
        self, channel_id: int, body: dict[str, Any], uploads: list[Upload]
    ) -> web.Response:
        content = body.get("content") or ""
        components = body.get("components") or []
        refusal = check_content(content, bool(components or uploads))
        if refusal is not None:
            return refusal
        message = Message(
            channel_id, next(self._ids), content, BOT_ID, components=components, uploads=uploads
        )
        with self._cond:
            self._messages[message.id] = message
            self._cond.notify_all()
            return json_response(self._message_json(message))

    def _edit_message(self, message_id: int, body: dict[str, Any]) -> web.Response:
        with self._cond:
            message = self._messages.get(message_id)
            if message is None or message.deleted:
                return error(404, 10008, "Unknown Message")
            content = body.get("content", message.content) or ""
            components = body.get("components", message.components) or []
            refusal = check_content(content, bool(components))
            if refusal is not None:
                return refusal
            message.edits.append(content)
            message.content, message.components = content, components
            self._cond.notify_all()
            return json_response(self._message_json(message))

    def _message_json(self, message: Message) -> dict[str, Any]:
        return {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "author": user_json(message.author_id, bot=message.author_id == BOT_ID),
            "content": message.content,
            "timestamp": now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [user_json(BOT_ID, bot=True)] if f"<@{BOT_ID}>" in message.content else [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": message.components,
        }
