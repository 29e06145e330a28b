"""``ExtensionContext`` inside a plugin host: a client of the kernel's context.

Everything that needs the kernel (events, agents, users) is an RPC to the
kernel, which enforces the manifest and answers refusals with an error the
extension sees as ``PermissionDeniedError``. Synchronous members are served
locally from what the kernel sent at load (config, declared secrets, data
dir); ``subscribe_event`` is checked here too, so a refused subscription
raises at the call like in-process, and again in the kernel, which decides.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.events.topics import pattern_within
from core.extensions.contract import EventHandler
from core.extensions.errors import NotAvailableError, PermissionDeniedError, SecretNotDeclaredError
from core.extensions.isolation.rpc import RpcPeer

StreamCallback = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LoadParams:
    """What the kernel sends a host at load: everything the extension may know."""

    ext_id: str
    ext_dir: str
    entrypoint: str
    data_dir: str
    config: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str | None] = field(default_factory=dict)
    subscribe: list[str] = field(default_factory=lambda: ["*"])
    depends_on: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    control: bool = False


class ClientContext:
    """The host-side ``ExtensionContext``; same members as the kernel's."""

    def __init__(self, peer: RpcPeer, params: LoadParams) -> None:
        self.extension_id = params.ext_id
        self.logger = logging.getLogger(f"ext.{params.ext_id}")
        self._peer = peer
        self._params = params
        self.handlers: dict[int, EventHandler] = {}
        self.streams: dict[int, tuple[StreamCallback | None, StreamCallback | None]] = {}
        self._ids = itertools.count(1)

    # ------------------------------------------------------------ local members

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._params.config)

    @property
    def extension_dir(self) -> Path:
        return Path(self._params.ext_dir)

    @property
    def data_dir(self) -> Path:
        path = Path(self._params.data_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def get_config(self, key: str, default: Any = None) -> Any:
        value = self._params.config.get(key)
        return default if value is None else value

    def get_secret(self, name: str) -> str | None:
        if name not in self._params.secrets:
            raise SecretNotDeclaredError(self.extension_id, name)
        return self._params.secrets[name] or None

    def get_extension(self, ext_id: str) -> Any | None:
        if ext_id not in self._params.depends_on:
            return None
        raise NotAvailableError(
            f"get_extension({ext_id!r}): an isolated extension cannot hold another "
            "extension's object; exchange events instead"
        )

    # ------------------------------------------------------------ event bus

    async def emit(
        self,
        topic: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> int:
        params = {
            "topic": topic,
            "payload": payload,
            "correlation_id": correlation_id,
            "idempotency_key": idempotency_key,
        }
        return int(await self._peer.call("ctx.emit", params))

    def subscribe_event(self, topic: str, handler: EventHandler) -> None:
        if not any(pattern_within(topic, p) for p in self._params.subscribe):
            raise PermissionDeniedError(self.extension_id, f"subscribe to {topic!r}")
        handler_id = next(self._ids)
        self.handlers[handler_id] = handler
        name = getattr(handler, "__qualname__", type(handler).__name__)
        params = {"topic": topic, "handler": handler_id, "name": name}
        self._peer.notify_nowait("ctx.subscribe", params)

    async def list_commands(self) -> list[tuple[str, str]]:
        rows = await self._peer.call("ctx.list_commands", {})
        return [(str(name), str(description)) for name, description in rows]

    async def notify_user(self, text: str, channel_id: str | None = None) -> None:
        await self._peer.call("ctx.notify_user", {"text": text, "channel_id": channel_id})

    async def request_agent_task(self, prompt: str, channel_id: str | None = None) -> None:
        await self._peer.call(
            "ctx.request_agent_task", {"prompt": prompt, "channel_id": channel_id}
        )

    async def request_agent_background(
        self, prompt: str, correlation_id: str | None = None
    ) -> None:
        params = {"prompt": prompt, "correlation_id": correlation_id}
        await self._peer.call("ctx.request_agent_background", params)

    async def on_user_message(
        self,
        text: str,
        user_id: str,
        channel_id: str | None = None,
        message_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> int:
        params = {
            "text": text,
            "user_id": user_id,
            "channel_id": channel_id,
            "message_id": message_id,
            "idempotency_key": idempotency_key,
        }
        return int(await self._peer.call("ctx.on_user_message", params))

    # ------------------------------------------------------------ agents

    async def invoke_agent(self, prompt: str) -> str:
        return str(await self._peer.call("ctx.invoke_agent", {"prompt": prompt}))

    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: StreamCallback | None = None,
        on_tool_call: StreamCallback | None = None,
    ) -> str:
        stream_id = next(self._ids)
        self.streams[stream_id] = (on_chunk, on_tool_call)
        try:
            params = {"prompt": prompt, "stream": stream_id}
            return str(await self._peer.call("ctx.invoke_agent_streamed", params))
        finally:
            self.streams.pop(stream_id, None)

    async def enrich_prompt(self, prompt: str, agent_id: str | None = None) -> str:
        params = {"prompt": prompt, "agent_id": agent_id}
        return str(await self._peer.call("ctx.enrich_prompt", params))

    # ------------------------------------------------------------ system

    def request_restart(self) -> None:
        self._require_control("restart Hearth")
        self._peer.notify_nowait("ctx.request_restart")

    def request_shutdown(self) -> None:
        self._require_control("shut Hearth down")
        self._peer.notify_nowait("ctx.request_shutdown")

    def _require_control(self, what: str) -> None:
        """Refuse here as well: a notification carries no answer back, and the
        kernel refuses (and logs) it anyway."""
        if not self._params.control:
            raise PermissionDeniedError(
                self.extension_id, f"{what} (declare `permissions.control: true` in its manifest)"
            )


class ForwardingLogHandler(logging.Handler):
    """Sends the extension's log records to the kernel (which rate-limits them)."""

    def __init__(self, peer: RpcPeer) -> None:
        super().__init__()
        self._peer = peer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            params = {"level": record.levelno, "name": record.name, "message": text}
            self._peer.notify_nowait("log", params)
        except Exception:
            self.handleError(record)
