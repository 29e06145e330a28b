"""A real Matrix homeserver for the Matrix channel tests: Synapse from PyPI on
SQLite, on a free loopback port, with a generated ``homeserver.yaml`` (no
federation, rate limits relaxed, registration by shared secret), and test
users who talk to the bot with nio's ``AsyncClient``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import itertools
import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from conftest import PROJECT_ROOT

EXTENSION_ID = "matrix_channel"
SOURCE_DIR = PROJECT_ROOT / "sandbox" / "extensions" / EXTENSION_ID
SERVER_NAME = "hearth.test"
START_TIMEOUT_S = 90.0
_RELAXED = {"per_second": 10_000, "burst_count": 10_000}
_names = itertools.count(1)


def synapse_missing() -> str | None:
    """Why the tests cannot run a homeserver here (``None``: they can)."""
    if importlib.util.find_spec("synapse") is None or importlib.util.find_spec("nio") is None:
        return "Synapse or matrix-nio not installed (pip install matrix-synapse matrix-nio)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Synapse:
    """One homeserver process; ``url`` is its client-server API base."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.shared_secret = secrets.token_hex(16)
        self.start_s = 0.0  # how long it took to answer /health
        self._proc: subprocess.Popen[bytes] | None = None

    def config(self) -> dict[str, Any]:
        root = self.root
        return {
            "server_name": SERVER_NAME,
            "pid_file": str(root / "homeserver.pid"),
            "report_stats": False,
            "listeners": [
                {
                    "port": self.port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    "resources": [{"names": ["client"], "compress": False}],
                }
            ],
            "database": {"name": "sqlite3", "args": {"database": str(root / "homeserver.db")}},
            "media_store_path": str(root / "media"),
            "signing_key_path": str(root / "signing.key"),
            "registration_shared_secret": self.shared_secret,
            "macaroon_secret_key": secrets.token_hex(16),
            "form_secret": secrets.token_hex(16),
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "federation_domain_whitelist": [],
            "enable_metrics": False,
            "presence": {"enabled": False},
            "rc_message": _RELAXED,
            "rc_registration": _RELAXED,
            "rc_joins": {"local": _RELAXED, "remote": _RELAXED},
            "rc_login": {"address": _RELAXED, "account": _RELAXED, "failed_attempts": _RELAXED},
            "rc_invites": {"per_room": _RELAXED, "per_user": _RELAXED, "per_issuer": _RELAXED},
        }

    def start(self) -> Synapse:
        from signedjson.key import generate_signing_key, write_signing_keys

        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / "signing.key").open("w") as key_file:
            write_signing_keys(key_file, [generate_signing_key("a_test")])
        config = self.root / "homeserver.yaml"
        config.write_text(json.dumps(self.config()))  # YAML is a superset of JSON
        began = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(config)],
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=(self.root / "synapse.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        while not self._healthy():
            if self._proc.poll() is not None:
                raise RuntimeError(f"Synapse exited: {self.log_tail()}")
            if time.monotonic() - began > START_TIMEOUT_S:
                raise RuntimeError(f"Synapse not up in {START_TIMEOUT_S} s: {self.log_tail()}")
            time.sleep(0.05)
        self.start_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

    def log_tail(self) -> str:
        path = self.root / "synapse.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def register(self, prefix: str) -> tuple[str, str]:
        """A new user (named ``prefix`` plus a counter): (user id, access token)."""
        name = f"{prefix}{next(_names)}"
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        with urllib.request.urlopen(endpoint, timeout=10) as response:
            nonce = json.loads(response.read())["nonce"]
        password = secrets.token_hex(8)
        mac = hmac.new(self.shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), name.encode(), password.encode(), b"notadmin"]))
        body = {
            "nonce": nonce,
            "username": name,
            "password": password,
            "admin": False,
            "mac": mac.hexdigest(),
        }
        request = urllib.request.Request(
            endpoint, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        return str(answer["user_id"]), str(answer["access_token"])


class MatrixUser:
    """A test user: a nio client who opens a direct room with the bot and reads it."""

    def __init__(self, homeserver: Synapse, prefix: str) -> None:
        from nio import AsyncClient

        self.user_id, token = homeserver.register(prefix)
        self.client = AsyncClient(homeserver.url, self.user_id)
        self.client.access_token = token

    async def open_direct(self, bot_id: str, timeout: float = 30.0) -> str:
        """A direct room with the bot, once the bot has joined it."""
        from nio import RoomCreateResponse

        response = await self.client.room_create(is_direct=True, invite=[bot_id])
        assert isinstance(response, RoomCreateResponse), response
        room_id = str(response.room_id)
        await self.wait_joined(room_id, bot_id, timeout)
        return room_id

    async def wait_joined(self, room_id: str, user_id: str, timeout: float = 30.0) -> None:
        from nio import JoinedMembersResponse

        async def joined() -> bool:
            members = await self.client.joined_members(room_id)
            assert isinstance(members, JoinedMembersResponse), members
            return any(m.user_id == user_id for m in members.members)

        await until(joined, timeout)

    async def send(self, room_id: str, text: str, *, reply_to: str | None = None) -> str:
        from nio import RoomSendResponse

        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        if reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        response = await self.client.room_send(room_id, "m.room.message", content)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def send_file(
        self, room_id: str, data: bytes, name: str, mime_type: str, *, caption: str = ""
    ) -> str:
        """Upload ``data`` and post it (``m.image`` for a picture, else ``m.file``)."""
        import io

        from nio import RoomSendResponse, UploadResponse

        uploaded, _ = await self.client.upload(
            io.BytesIO(data), content_type=mime_type, filename=name, filesize=len(data)
        )
        assert isinstance(uploaded, UploadResponse), uploaded
        content = {
            "msgtype": "m.image" if mime_type.startswith("image/") else "m.file",
            "body": caption or name,
            "filename": name,
            "url": uploaded.content_uri,
            "info": {"mimetype": mime_type, "size": len(data)},
        }
        response = await self.client.room_send(room_id, "m.room.message", content)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def fetch(self, mxc: str) -> bytes:
        """The bytes of a file in the media repository."""
        from nio import MemoryDownloadResponse

        response = await self.client.download(mxc)
        assert isinstance(response, MemoryDownloadResponse), response
        return bytes(response.body)

    async def react(self, room_id: str, event_id: str, key: str) -> None:
        from nio import RoomSendResponse

        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        response = await self.client.room_send(room_id, "m.reaction", content)
        assert isinstance(response, RoomSendResponse), response

    async def bot_messages(self, room_id: str, bot_id: str) -> list[tuple[str, str]]:
        """(event id, text as shown) of the bot's messages, oldest first, edits applied."""
        from nio import RoomMessagesResponse

        response = await self.client.room_messages(room_id, limit=200)
        assert isinstance(response, RoomMessagesResponse), response
        shown: dict[str, str] = {}
        for event in reversed(response.chunk):
            source = event.source
            if source.get("sender") != bot_id or source.get("type") != "m.room.message":
                continue
            content = source.get("content", {})
            relates = content.get("m.relates_to", {})
            if relates.get("rel_type") == "m.replace":
                if relates.get("event_id") in shown:
                    shown[relates["event_id"]] = content["m.new_content"]["body"]
                continue
            shown[source["event_id"]] = content.get("body", "")
        return list(shown.items())

    async def bot_writes(self, room_id: str, bot_id: str) -> list[tuple[int, dict[str, Any]]]:
        """(server time in ms, content) of every message and edit the bot sent, oldest first."""
        from nio import RoomMessagesResponse

        response = await self.client.room_messages(room_id, limit=200)
        assert isinstance(response, RoomMessagesResponse), response
        return [
            (int(e.source["origin_server_ts"]), e.source.get("content", {}))
            for e in reversed(response.chunk)
            if e.source.get("sender") == bot_id and e.source.get("type") == "m.room.message"
        ]

    async def bot_texts(self, room_id: str, bot_id: str) -> list[str]:
        return [text for _, text in await self.bot_messages(room_id, bot_id)]

    async def close(self) -> None:
        await self.client.close()


async def until(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Await ``condition()`` (a coroutine function) until truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.1)


def install_extension(ext_root: Path, ext_id: str = EXTENSION_ID) -> Path:
    """Copy a bundled extension into the test's extension directory."""
    target = ext_root / ext_id
    shutil.copytree(
        PROJECT_ROOT / "sandbox" / "extensions" / ext_id,
        target,
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return target


def matrix_config(url: str, allowed: Sequence[str], **extra: Any) -> dict[str, Any]:
    return {
        "homeserver_url": url,
        "allowed_user_ids": list(allowed),
        "sync_timeout_s": 1,
        **extra,
    }


def write_settings(
    settings_file: Callable[..., Path],
    url: str,
    allowed: Sequence[str],
    *,
    sections: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    return settings_file(
        channels={"default": EXTENSION_ID},
        extensions={EXTENSION_ID: matrix_config(url, allowed, **extra)},
        **(sections or {}),
    )
