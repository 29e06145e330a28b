"""A fake of Slack's Web API and Socket Mode websocket on 127.0.0.1, for real-network
tests through slack-bolt (``api_base_url = slack.base_url``).

aiohttp in a background thread with its own event loop, so it serves
in-process async tests and kernels started as subprocesses alike::

    with FakeSlack() as slack:
        slack.dm("hi", user="UALICE")              # an events_api envelope (message.im)
        ...                                        # the kernel answers
        assert slack.dm_texts("UALICE") == ["echo: hi"]

Web API methods: ``auth.test``, ``apps.connections.open`` (needs the app-level
token; hands out this server's own ``wss``-like URL), ``conversations.open``
(a user's DM is ``D`` + their id), ``chat.postMessage`` (with ``blocks`` and
``thread_ts``), ``chat.update`` (keeps the blocks when given none, like Slack);
a button press's ``response_url`` records what is posted to it (``responses``).
Every call is recorded (``calls``). ``fail_next`` scripts a ``429`` with
``Retry-After``; ``hold`` makes a method's calls hang until ``release``. The socket sends ``hello``, then each envelope not yet
acknowledged (``events_api`` and ``interactive``); an envelope is re-sent on
the next connection until its ``envelope_id`` comes back as an acknowledgement,
as Slack does; ``unconfirm`` forgets an acknowledgement (a redelivery).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

from support.slack_files import SharedFile, SlackFiles

__all__ = ["BOT_TOKEN", "BOT_USER", "Call", "FakeSlack", "Posted"]

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-test-app-token"
BOT_USER = "UHEARTHBOT"
TEAM = "T0001"


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic()


@dataclass
class Posted:
    """A message the bot posted, as it looks now."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    edits: list[str] = field(default_factory=list)
    files: list[SharedFile] = field(default_factory=list)

    @property
    def buttons(self) -> list[tuple[str, str, str]]:
        """(label, action_id, value) of every button in the message's blocks."""
        found = []
        for block in self.blocks:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("type") == "button":
                    label = element.get("text", {}).get("text", "")
                    found.append((label, element.get("action_id", ""), element.get("value", "")))
        return found


class FakeSlack:
    """Context manager; ``base_url`` is slack_sdk's ``base_url`` (``.../api/``)."""

    def __init__(self, bot_token: str = BOT_TOKEN, app_token: str = APP_TOKEN) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self._lock = threading.Condition()
        self._calls: list[Call] = []
        self.files = SlackFiles(bot_token)
        self._posted: list[Posted] = []
        self.responses: list[dict[str, Any]] = []  # what was posted to a response_url
        self._envelopes: dict[str, dict[str, Any]] = {}  # every envelope, by id
        self._pending: dict[str, dict[str, Any]] = {}  # envelope id -> envelope, unacked
        self._acked: list[str] = []
        self._failures: dict[str, list[float]] = {}
        self._held: set[str] = set()  # methods whose calls hang, then fail unanswered
        self._release = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self.connections = 0
        self._ids = itertools.count(1)
        self._ts = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fake-slack", daemon=True
        )

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeSlack:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._web_api)
        app.router.add_get("/link", self._socket)
        app.router.add_post("/response", self._response_url)
        self.files.routes(app)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.files.base = f"http://127.0.0.1:{self._port}"

    async def _stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/api/"

    # ------------------------------------------------------------ scripting

    def dm(
        self,
        text: str,
        *,
        user: str,
        event_id: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> str:
        """``user`` writes ``text`` in their DM with the bot (``message.im``); the event id.
        ``files`` (entries of ``self.files.offer``) are shared with it (``file_share``)."""
        ts = self._next_ts()
        event: dict[str, Any] = {
            "type": "message",
            "channel": f"D{user}",
            "channel_type": "im",
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "client_msg_id": f"msg-{ts}",
            "team": TEAM,
        }
        if files:
            event |= {"subtype": "file_share", "files": files}
        return self._event(event, event_id)

    def mention(self, text: str, *, user: str, channel: str, thread_ts: str | None = None) -> str:
        """``user`` mentions the bot in ``channel`` (``app_mention``); the event id."""
        ts = self._next_ts()
        event: dict[str, Any] = {
            "type": "app_mention",
            "channel": channel,
            "user": user,
            "text": f"<@{BOT_USER}> {text}",
            "ts": ts,
            "event_ts": ts,
            "team": TEAM,
        }
        if thread_ts is not None:
            event["thread_ts"] = thread_ts
        return self._event(event, None)

    def press(self, message: Posted, label: str, *, user: str) -> str:
        """``user`` presses the button labelled ``label`` under ``message``
        (a ``block_actions`` envelope); the envelope id."""
        action = next(b for b in message.buttons if b[0] == label)
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM},
            "user": {"id": user, "username": user.lower(), "team_id": TEAM},
            "api_app_id": "A0001",
            "token": "verification",
            "trigger_id": f"trigger-{next(self._ids)}",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
            },
            "channel": {"id": message.channel, "name": "directmessage"},
            "message": {"type": "message", "ts": message.ts, "text": message.text},
            "response_url": f"http://127.0.0.1:{self._port}/response",
            "actions": [
                {
                    "type": "button",
                    "action_id": action[1],
                    "block_id": "question",
                    "value": action[2],
                    "text": {"type": "plain_text", "text": label},
                    "action_ts": self._next_ts(),
                }
            ],
        }
        return self._envelope("interactive", payload)

    def unconfirm(self, event_id: str) -> None:
        """Forget the acknowledgement of the envelope carrying ``event_id``: Slack
        sends it again (with ``retry_attempt`` 1) on the next connection."""
        with self._lock:
            for envelope in self._envelopes.values():
                if envelope["payload"].get("event_id") == event_id:
                    envelope["retry_attempt"] = 1
                    envelope["retry_reason"] = "timeout"
                    self._pending[envelope["envelope_id"]] = envelope
                    if envelope["envelope_id"] in self._acked:
                        self._acked.remove(envelope["envelope_id"])

    def redeliver(self, event_id: str) -> None:
        """Send the envelope carrying ``event_id`` again now, on the open connection
        (Slack's retry of an envelope it did not see acknowledged in time)."""
        self.unconfirm(event_id)
        with self._lock:
            again = [e for e in self._pending.values() if e["payload"].get("event_id") == event_id]
        for envelope in again:
            asyncio.run_coroutine_threadsafe(self._push(envelope), self._loop)

    def hold(self, method: str) -> None:
        """Calls of ``method`` hang from now on (recorded, nothing done) until ``release``:
        a kernel killed meanwhile never heard back, and Slack never acted on them."""
        with self._lock:
            self._held.add(method)

    def release(self) -> None:
        """Held calls fail (``request_timeout``, nothing posted); new ones are served."""
        with self._lock:
            self._held.clear()
        self._loop.call_soon_threadsafe(self._release.set)

    def fail_next(self, method: str, *retry_after_s: float) -> None:
        """The next calls of ``method`` answer ``429`` with these ``Retry-After``s."""
        with self._lock:
            self._failures.setdefault(method, []).extend(retry_after_s)

    # ------------------------------------------------------------ inspection

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def sent(self) -> list[dict[str, Any]]:
        """Every envelope scripted so far, in order."""
        with self._lock:
            return list(self._envelopes.values())

    def acked(self, envelope_or_event_id: str) -> bool:
        with self._lock:
            for envelope_id in self._acked:
                envelope = self._envelopes[envelope_id]
                if envelope_or_event_id in (envelope_id, envelope["payload"].get("event_id")):
                    return True
            return False

    def messages(self, channel: str) -> list[Posted]:
        with self._lock:
            return [p for p in self._posted if p.channel == channel]

    def dm_messages(self, user: str) -> list[Posted]:
        return self.messages(f"D{user}")

    def dm_texts(self, user: str) -> list[str]:
        return [p.text for p in self.dm_messages(user)]

    def wait_until(self, condition: Callable[[], Any], timeout_s: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout_s} s; calls: {self.calls[-10:]}")
            with self._lock:
                self._lock.wait(0.05)

    # ------------------------------------------------------------ internals

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _event(self, event: dict[str, Any], event_id: str | None) -> str:
        event_id = event_id or f"Ev{next(self._ids):06d}"
        payload = {
            "token": "verification",
            "team_id": TEAM,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        self._envelope("events_api", payload)
        return event_id

    def _envelope(self, kind: str, payload: dict[str, Any]) -> str:
        envelope_id = f"env-{next(self._ids)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": payload,
        }
        with self._lock:
            self._envelopes[envelope_id] = envelope
            self._pending[envelope_id] = envelope
        asyncio.run_coroutine_threadsafe(self._push(envelope), self._loop)
        return envelope_id

    async def _push(self, envelope: dict[str, Any]) -> None:
        for ws in list(self._sockets):
            if not ws.closed:
                await ws.send_str(json.dumps(envelope))
                return

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self._lock:
            self.connections += 1
            backlog = list(self._pending.values())
            self._lock.notify_all()
        await ws.send_str(
            json.dumps({"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A1"}})
        )
        self._sockets.insert(0, ws)
        for envelope in backlog:
            await ws.send_str(json.dumps(envelope))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                envelope_id = json.loads(message.data).get("envelope_id")
                with self._lock:
                    if self._pending.pop(envelope_id, None) is not None:
                        self._acked.append(envelope_id)
                    self._lock.notify_all()
        finally:
            self._sockets.remove(ws)
        return ws

    async def _response_url(self, request: web.Request) -> web.Response:
        """A block_actions ``response_url``: an ephemeral note for the presser."""
        body = await request.json()
        with self._lock:
            self.responses.append(body)
            self._lock.notify_all()
        return web.Response(text="ok")

    async def _web_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        raw = await request.text()
        if request.content_type == "application/json" and raw:
            params.update(json.loads(raw))
        elif raw:
            params.update(dict(parse_qsl(raw)))
        for key in ("blocks",):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        with self._lock:
            self._calls.append(Call(method, params, time.monotonic()))
            failures = self._failures.get(method)
            retry_after = failures.pop(0) if failures else None
            held = method in self._held
            self._lock.notify_all()
        if held:
            await self._release.wait()
            return web.json_response({"ok": False, "error": "request_timeout"})
        if retry_after is not None:
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": f"{retry_after:g}"},
            )
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != wanted:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "conversations.open": self._conversations_open,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "files.getUploadURLExternal": self.files.upload_url,
            "files.completeUploadExternal": self._share,
        }.get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        return web.json_response(handler(params))

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://hearth-test.slack.com/",
            "team": "Hearth Test",
            "user": "hearth",
            "team_id": TEAM,
            "user_id": BOT_USER,
            "bot_id": "B0001",
        }

    def _connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self._port}/link?ticket={next(self._ids)}"}

    def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = str(params.get("users", ""))
        if not users or "," in users:
            return {"ok": False, "error": "users_list_not_supplied"}
        return {"ok": True, "channel": {"id": f"D{users}"}}

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        text = str(params.get("text") or "")
        if not text and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        with self._lock:
            posted = Posted(
                channel=str(params["channel"]),
                ts=self._next_ts(),
                text=text,
                thread_ts=params.get("thread_ts"),
                blocks=list(params.get("blocks") or []),
            )
            self._posted.append(posted)
        return {"ok": True, "channel": posted.channel, "ts": posted.ts, "message": {"text": text}}

    def _share(self, params: dict[str, Any]) -> dict[str, Any]:
        shared = self.files.complete(params)
        if isinstance(shared, str):
            return {"ok": False, "error": shared}
        text, thread = str(params.get("initial_comment") or ""), params.get("thread_ts")
        with self._lock:
            channel, ts = str(params["channel_id"]), self._next_ts()
            self._posted.append(Posted(channel, ts, text, thread, files=shared))
        return {"ok": True, "files": [{"id": f"F{ts}", "title": f.title} for f in shared]}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            found = next(
                (
                    p
                    for p in self._posted
                    if p.channel == params.get("channel") and p.ts == params.get("ts")
                ),
                None,
            )
            if found is None:
                return {"ok": False, "error": "message_not_found"}
            found.text = str(params.get("text") or "")
            found.edits.append(found.text)
            if "blocks" in params:
                found.blocks = list(params["blocks"] or [])
        return {"ok": True, "channel": found.channel, "ts": found.ts, "text": found.text}
