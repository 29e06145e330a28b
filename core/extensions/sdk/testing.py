"""Test helpers: run one extension against a fake kernel, no bus, no model.

``FakeContext`` implements ``ExtensionContext`` in memory and records what
the extension asks for (emits, notifications, user messages, agent tasks,
restarts); ``deliver`` hands an event to the handlers it subscribed. Its
state is a dict (no expiry, no limits) with the kernel's rules for keys,
JSON values and scope: session scope needs a turn being served (``serving``).
Its ``services`` is a real registry (one instance per key, closed by ``running``).
``running`` initializes and starts the extension (checking its protocols as
the loader does) and always stops and destroys it. ``run_command`` and
``call_tool`` call one command or tool the way the kernel would, serving
their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core.events.models import Event
from core.events.topics import SystemTopics, topic_matches
from core.extensions.access.state_scope import check_key, encode_value, serving, state_session
from core.extensions.context.shared_services import ExtensionServices, ServiceRegistry
from core.extensions.contract import (
    CommandProvider,
    EventHandler,
    Extension,
    KeptFile,
    KernelStatus,
    Leadership,
    McpAnswer,
    McpOp,
    ServiceProvider,
    StateScope,
    StoreLocation,
    ToolProvider,
    TurnContext,
)
from core.extensions.loading.capabilities import detect_capabilities

__all__ = [
    "Emitted",
    "FakeContext",
    "call_tool",
    "load_extension",
    "run_command",
    "running",
    "serving",
]

E = TypeVar("E", bound=Extension)


@dataclass(frozen=True, slots=True)
class Emitted:
    """One ``emit`` (or system publish) the extension made."""

    id: int
    topic: str
    payload: dict[str, Any]
    correlation_id: str | None = None
    idempotency_key: str | None = None


@dataclass
class FakeContext:
    """An in-memory ``ExtensionContext``; every list records one kind of request."""

    data_root: Path
    extension_id: str = "test_ext"
    config_values: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)
    agent_reply: str = ""
    emitted: list[Emitted] = field(default_factory=list)
    # (text, channel_id, user_id) of every notify_user call
    notifications: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    user_messages: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    # ui_request: what the user "answers", in order (None: no answer), and what was asked
    ui_answers: list[str | None] = field(default_factory=list)
    ui_requests: list[tuple[str, str, list[str]]] = field(default_factory=list)
    agent_tasks: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, EventHandler]] = field(default_factory=list)
    commands: list[tuple[str, str]] = field(default_factory=list)
    post_processors: list[tuple[str, str]] = field(default_factory=list)
    # what held_notices answers: (channel id, user id) -> the texts waiting there
    held: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # what keep_file kept, by id (kept_file answers a user their own files only)
    files: dict[str, KeptFile] = field(default_factory=dict)
    restarts_requested: int = 0
    shutdowns_requested: int = 0
    # (session id, or None for extension scope; key) -> the stored value
    state: dict[tuple[str | None, str], Any] = field(default_factory=dict)
    # what kernel_status answers (a quiet kernel by default); requeued event ids
    status: KernelStatus = field(
        default_factory=lambda: KernelStatus(0.0, "no model", (), (), {}, (), ())
    )
    requeued: list[int] = field(default_factory=list)
    # what leadership() answers: set ``Leadership(False, 1.0)`` to test a follower
    leading: Leadership = field(default_factory=lambda: Leadership(True))
    # what mcp_request answers, and the requests made: (op, user id, name, arguments)
    mcp_answer: McpAnswer = field(default_factory=McpAnswer)
    mcp_requests: list[tuple[str, str, str | None, str]] = field(default_factory=list)
    # context.services, with the kernel's rules; ``running`` closes it at the end.
    # Give two contexts one registry to test sharing between extensions.
    shared_services: ServiceRegistry = field(default_factory=ServiceRegistry)

    def __post_init__(self) -> None:
        self.logger = logging.getLogger(f"ext.{self.extension_id}")
        self._services = ExtensionServices(self.shared_services, self.extension_id)
        self._ids = itertools.count(1)
        self._keys: dict[str, int] = {}

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.config_values)

    @property
    def services(self) -> ExtensionServices:
        return self._services

    @property
    def data_dir(self) -> Path:
        path = self.data_root / self.extension_id
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def storage(self) -> StoreLocation:
        """SQLite files in ``data_dir`` (a test may give a store PostgreSQL itself)."""
        return StoreLocation(self.data_dir, extension_id=self.extension_id)

    @property
    def extension_dir(self) -> Path:
        return self.data_root / "extensions" / self.extension_id

    def get_config(self, key: str, default: Any = None) -> Any:
        value = self.config_values.get(key)
        return default if value is None else value

    def get_secret(self, name: str) -> str | None:
        return self.secrets.get(name)

    def get_extension(self, ext_id: str) -> Any | None:
        return self.extensions.get(ext_id)

    # ------------------------------------------------------------ events

    async def emit(
        self,
        topic: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> int:
        """Record the event; a repeated ``idempotency_key`` returns the first id (as the bus)."""
        if idempotency_key is not None and idempotency_key in self._keys:
            return self._keys[idempotency_key]
        json.dumps(payload)  # the bus refuses what is not JSON; so does the fake
        event_id = next(self._ids)
        self.emitted.append(Emitted(event_id, topic, payload, correlation_id, idempotency_key))
        if idempotency_key is not None:
            self._keys[idempotency_key] = event_id
        return event_id

    def subscribe_event(self, topic: str, handler: EventHandler) -> None:
        self.subscriptions.append((topic, handler))

    async def deliver(
        self, topic: str, payload: dict[str, Any], *, correlation_id: str | None = None
    ) -> int:
        """Hand one event to every subscribed handler whose pattern matches; how many ran."""
        event = Event(next(self._ids), topic, "test", payload, correlation_id, time.time())
        handlers = [h for pattern, h in self.subscriptions if topic_matches(pattern, topic)]
        for handler in handlers:
            await handler(event)
        return len(handlers)

    async def notify_user(
        self, text: str, channel_id: str | None = None, *, user_id: str | None = None
    ) -> None:
        self.notifications.append((text, channel_id, user_id))

    async def request_agent_task(self, prompt: str, channel_id: str | None = None) -> None:
        self.agent_tasks.append(prompt)

    async def request_agent_background(
        self, prompt: str, correlation_id: str | None = None
    ) -> None:
        self.agent_tasks.append(prompt)

    async def on_user_message(
        self,
        text: str,
        user_id: str,
        channel_id: str | None = None,
        message_id: str | None = None,
        *,
        idempotency_key: str | None = None,
        sender_id: str | None = None,
        files: Sequence[str] = (),
    ) -> int:
        message = {"text": text, "user_id": user_id, "channel_id": channel_id or self.extension_id}
        if sender_id is not None:
            message["sender_id"] = sender_id
        if files:
            message["files"] = ",".join(files)
        self.user_messages.append({**message, "message_id": message_id})
        return await self.emit(SystemTopics.USER_MESSAGE, message, idempotency_key=idempotency_key)

    async def answer_request(
        self, request_id: str, answer: str, user_id: str, *, sender_id: str | None = None
    ) -> None:
        """Recorded in ``answers`` (and emitted on ``system.ui.answer``)."""
        answer_payload = {"request_id": request_id, "answer": answer, "user_id": user_id}
        if sender_id is not None:
            answer_payload["sender_id"] = sender_id
        self.answers.append(answer_payload)
        await self.emit(SystemTopics.UI_ANSWER, {**answer_payload, "channel_id": self.extension_id})

    async def ui_request(
        self,
        kind: str,
        prompt: str,
        options: Sequence[str] = (),
        *,
        timeout_s: float | None = None,
    ) -> str | None:
        """Recorded in ``ui_requests``; answered with the next of ``ui_answers``."""
        self.ui_requests.append((kind, prompt, list(options)))
        return self.ui_answers.pop(0) if self.ui_answers else None

    async def list_commands(self) -> list[tuple[str, str]]:
        return sorted(self.commands)

    async def list_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> list[tuple[str, str]]:
        return list(self.post_processors)

    async def describe_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> dict[str, Any]:
        activated = [
            {"name": name, "processor": name, "default_param": None, "description": about}
            for name, about in self.post_processors
        ]
        return {"activated": activated, "available": []}

    async def held_notices(self, channel_id: str, user_id: str) -> list[str]:
        return list(self.held.get((channel_id, user_id), []))

    async def kept_file(
        self, user_id: str, file_id: str, channel_id: str | None = None
    ) -> KeptFile | None:
        found = self.files.get(file_id)
        return found if found is not None and found.person == user_id else None

    async def keep_file(
        self,
        user_id: str,
        name: str,
        mime_type: str,
        path: str,
        channel_id: str | None = None,
    ) -> KeptFile:
        file_id = f"{len(self.files) + 1:024x}"
        # a test double: the size of the file when there is one
        size = os.path.getsize(path) if os.path.isfile(path) else 0  # noqa: ASYNC240
        kept = KeptFile(file_id, name, mime_type, size, path, "", user_id)
        self.files[file_id] = kept
        return kept

    # ------------------------------------------------------------ agents

    async def invoke_agent(self, prompt: str) -> str:
        self.agent_tasks.append(prompt)
        return self.agent_reply

    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: Callable[[str], Awaitable[None]] | None = None,
        on_tool_call: Callable[[str], Awaitable[None]] | None = None,
    ) -> str:
        if on_chunk is not None and self.agent_reply:
            await on_chunk(self.agent_reply)
        return await self.invoke_agent(prompt)

    async def enrich_prompt(self, prompt: str, agent_id: str | None = None) -> str:
        return prompt

    # ------------------------------------------------------------ state

    async def get_state(
        self, key: str, default: Any = None, *, scope: StateScope = "session"
    ) -> Any:
        slot = (state_session(scope), check_key(key))
        return json.loads(json.dumps(self.state[slot])) if slot in self.state else default

    async def set_state(self, key: str, value: Any, *, scope: StateScope = "session") -> None:
        encoded = encode_value(check_key(key), value)
        self.state[state_session(scope), key] = json.loads(encoded)

    async def delete_state(self, key: str, *, scope: StateScope = "session") -> None:
        self.state.pop((state_session(scope), check_key(key)), None)

    async def clear_state(self, *, scope: StateScope = "session") -> None:
        session = state_session(scope)
        for slot in [slot for slot in self.state if slot[0] == session]:
            del self.state[slot]

    async def kernel_status(self) -> KernelStatus:
        return self.status

    async def requeue_dead_letter(self, event_id: int) -> int:
        self.requeued.append(event_id)
        return 1

    async def mcp_request(
        self, op: McpOp, user_id: str, name: str | None = None, arguments: str = "{}"
    ) -> McpAnswer:
        self.mcp_requests.append((op, user_id, name, arguments))
        return self.mcp_answer

    async def leadership(self) -> Leadership:
        return self.leading

    def request_restart(self) -> None:
        self.restarts_requested += 1

    def request_shutdown(self) -> None:
        self.shutdowns_requested += 1


def load_extension(ext_dir: str | Path) -> Any:
    """A new instance of the extension in ``ext_dir``, imported the way the loader
    imports it (its manifest's ``entrypoint``, relative imports working); for
    ``isolation: wasm``, its module in wasmtime."""
    from core.extensions.loading.importer import import_entrypoint
    from core.extensions.loading.manifest import load_manifest

    manifest = load_manifest(Path(ext_dir))
    if manifest.isolation == "wasm":  # its module, in wasmtime as the kernel runs it
        from core.extensions.isolation.wasm import WasmExtension

        return WasmExtension(manifest, Path(ext_dir))
    if manifest.entrypoint is None:
        raise ValueError(f"{ext_dir}: the manifest has no entrypoint (a declarative agent)")
    return import_entrypoint(manifest.id, Path(ext_dir), manifest.entrypoint)()


@contextlib.asynccontextmanager
async def running(ext: E, context: FakeContext, *, background: bool = True) -> AsyncIterator[E]:
    """``initialize`` → protocol check → ``start`` (+ ``run_background``); always stop/destroy."""
    await ext.initialize(context)
    detect_capabilities(ext)
    if isinstance(ext, CommandProvider):
        context.commands.extend((c.name, c.description) for c in ext.get_commands())
    await ext.start()
    service: asyncio.Task[None] | None = None
    if background and isinstance(ext, ServiceProvider):
        service = asyncio.create_task(ext.run_background(), name="extension-service")
    try:
        yield ext
    finally:
        if service is not None:
            service.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await service
        try:
            await ext.stop()
        finally:
            try:
                await ext.destroy()
            finally:
                await context.shared_services.aclose()


async def run_command(
    ext: object, name: str, args: str = "", turn: TurnContext | None = None
) -> str | None:
    """Answer ``/name args`` with the extension's command, as the kernel would."""
    if not isinstance(ext, CommandProvider):
        raise TypeError(f"{type(ext).__name__} offers no commands (no get_commands)")
    commands = {c.name: c for c in ext.get_commands()}
    if name not in commands:
        raise LookupError(f"no command /{name}; the extension offers {sorted(commands)}")
    turn = turn or TurnContext()
    with serving(turn):
        return await commands[name].handler(args.strip(), turn)


async def call_tool(
    ext: object,
    name: str,
    arguments: dict[str, Any] | None = None,
    turn: TurnContext | None = None,
) -> Any:
    """Call one of the extension's function tools with JSON ``arguments``."""
    from agents.tool_context import ToolContext

    if not isinstance(ext, ToolProvider):
        raise TypeError(f"{type(ext).__name__} offers no tools (no get_tools)")
    tools = {t.name: t for t in ext.get_tools()}
    if name not in tools:
        raise LookupError(f"no tool {name!r}; the extension offers {sorted(tools)}")
    raw = json.dumps(arguments or {})
    turn = turn or TurnContext()
    tool_context = ToolContext(
        context=turn, tool_name=name, tool_call_id="test", tool_arguments=raw
    )
    with serving(turn):
        return await tools[name].on_invoke_tool(tool_context, raw)
