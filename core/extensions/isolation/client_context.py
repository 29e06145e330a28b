"""``ExtensionContext`` inside a plugin host: a client of the kernel's context.

Everything that needs the kernel (events, agents, users) is an RPC to the
kernel, which enforces the manifest and answers refusals with an error the
extension sees as ``PermissionDeniedError``. Synchronous members are served
locally from what the kernel sent at load (config, declared secrets, data
dir); ``subscribe_event`` is checked here too, so a refused subscription
raises at the call like in-process, and again in the kernel, which decides.
``services`` is a registry of this host's own (objects cannot cross the
process boundary), with the kernel's rules. State calls carry the session
of the turn this host is serving (the host sets ``CURRENT_TURN`` around
each call that carries a turn); a bad key, a value that is not JSON or
session scope outside a turn fail here, at the call.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from core.events.topics import pattern_within
from core.extensions.contract import (
    EventHandler,
    KernelStatus,
    Leadership,
    McpAnswer,
    McpOp,
    StateScope,
    StoreLocation,
)
from core.extensions.errors import NotAvailableError, PermissionDeniedError, SecretNotDeclaredError
from core.extensions.isolation.messages import (
    AgentBackgroundParams,
    AgentTaskParams,
    AnswerRequestParams,
    ClearStateParams,
    ContextMethod,
    DeleteStateParams,
    EmitParams,
    Empty,
    EnrichPromptParams,
    GetStateParams,
    InvokeAgentParams,
    InvokeStreamedParams,
    ListPostProcessorsParams,
    LoadParams,
    LogParams,
    McpRequestParams,
    Notice,
    NotifyUserParams,
    RequeueParams,
    SetStateParams,
    StateValue,
    SubscribeParams,
    UiRequestParams,
    UserMessageParams,
)
from core.extensions.isolation.rpc import RpcPeer
from core.extensions.shared_services import ExtensionServices, ServiceRegistry
from core.extensions.state_scope import check_key, encode_value, state_session

StreamCallback = Callable[[str], Awaitable[None]]

# The kernel's token for the call this host is serving (``served_calls``), set by
# the host around each call; ``ui_request`` sends it back, and the kernel asks
# in the turn it stands for, and only while that call runs.
SERVED_TOKEN: ContextVar[str | None] = ContextVar("hearth_served_token", default=None)


@contextmanager
def serving_call(token: str | None) -> Iterator[None]:
    """Make ``token`` the served call's for the block (the host's calls)."""
    reset = SERVED_TOKEN.set(token)
    try:
        yield
    finally:
        SERVED_TOKEN.reset(reset)


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
        # objects cannot cross the process boundary: this host has its own registry
        # (same rules), closed when the extension is destroyed
        self.shared_services = ServiceRegistry()
        self._services = ExtensionServices(self.shared_services, params.ext_id)

    # ------------------------------------------------------------ local members

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._params.config)

    @property
    def extension_dir(self) -> Path:
        return Path(self._params.ext_dir)

    @property
    def services(self) -> ExtensionServices:
        return self._services

    @property
    def data_dir(self) -> Path:
        path = Path(self._params.data_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def storage(self) -> StoreLocation:
        """SQLite files in the data dir, whatever the kernel's backend: the sandbox
        gives an isolated extension no database credentials (ADR 0035)."""
        return StoreLocation(self.data_dir, extension_id=self.extension_id)

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
        params = EmitParams(topic, payload, correlation_id, idempotency_key)
        return int(await self._peer.call(ContextMethod.EMIT, params.to_wire()))

    def subscribe_event(self, topic: str, handler: EventHandler) -> None:
        if not any(pattern_within(topic, p) for p in self._params.subscribe):
            raise PermissionDeniedError(self.extension_id, f"subscribe to {topic!r}")
        handler_id = next(self._ids)
        self.handlers[handler_id] = handler
        name = getattr(handler, "__qualname__", type(handler).__name__)
        params = SubscribeParams(topic, handler_id, name)
        self._peer.notify_nowait(Notice.SUBSCRIBE, params.to_wire())

    async def list_commands(self) -> list[tuple[str, str]]:
        rows = await self._peer.call(ContextMethod.LIST_COMMANDS, Empty().to_wire())
        return [(str(name), str(description)) for name, description in rows]

    async def kernel_status(self) -> KernelStatus:
        answer = await self._peer.call(ContextMethod.KERNEL_STATUS, Empty().to_wire())
        return KernelStatus.from_json(answer)

    async def requeue_dead_letter(self, event_id: int) -> int:
        params = RequeueParams(event_id)
        return int(await self._peer.call(ContextMethod.REQUEUE_DEAD_LETTER, params.to_wire()))

    async def mcp_request(
        self, op: McpOp, user_id: str, name: str | None = None, arguments: str = "{}"
    ) -> McpAnswer:
        params = McpRequestParams(op, user_id, name, arguments)
        return McpAnswer.from_json(
            await self._peer.call(ContextMethod.MCP_REQUEST, params.to_wire())
        )

    async def leadership(self) -> Leadership:
        leader, recheck_s = await self._peer.call(ContextMethod.LEADERSHIP, Empty().to_wire())
        return Leadership(bool(leader), None if recheck_s is None else float(recheck_s))

    async def list_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> list[tuple[str, str]]:
        params = ListPostProcessorsParams(user_id, channel_id).to_wire()
        rows = await self._peer.call(ContextMethod.LIST_POST_PROCESSORS, params)
        return [(str(name), str(description)) for name, description in rows]

    async def notify_user(
        self, text: str, channel_id: str | None = None, *, user_id: str | None = None
    ) -> None:
        params = NotifyUserParams(text, channel_id, user_id)
        await self._peer.call(ContextMethod.NOTIFY_USER, params.to_wire())

    async def request_agent_task(self, prompt: str, channel_id: str | None = None) -> None:
        params = AgentTaskParams(prompt, channel_id)
        await self._peer.call(ContextMethod.REQUEST_AGENT_TASK, params.to_wire())

    async def request_agent_background(
        self, prompt: str, correlation_id: str | None = None
    ) -> None:
        params = AgentBackgroundParams(prompt, correlation_id)
        await self._peer.call(ContextMethod.REQUEST_AGENT_BACKGROUND, params.to_wire())

    async def on_user_message(
        self,
        text: str,
        user_id: str,
        channel_id: str | None = None,
        message_id: str | None = None,
        *,
        idempotency_key: str | None = None,
        sender_id: str | None = None,
    ) -> int:
        params = UserMessageParams(
            text, user_id, channel_id, message_id, idempotency_key, sender_id
        )
        return int(await self._peer.call(ContextMethod.ON_USER_MESSAGE, params.to_wire()))

    async def answer_request(
        self, request_id: str, answer: str, user_id: str, *, sender_id: str | None = None
    ) -> None:
        params = AnswerRequestParams(request_id, answer, user_id, sender_id)
        await self._peer.call(ContextMethod.ANSWER_REQUEST, params.to_wire())

    async def ui_request(
        self,
        kind: str,
        prompt: str,
        options: Sequence[str] = (),
        *,
        timeout_s: float | None = None,
    ) -> str | None:
        served = SERVED_TOKEN.get()
        params = UiRequestParams(kind, prompt, [str(o) for o in options], timeout_s, served)
        answer = await self._peer.call(ContextMethod.UI_REQUEST, params.to_wire())
        return None if answer is None else str(answer)

    # ------------------------------------------------------------ agents

    async def invoke_agent(self, prompt: str) -> str:
        params = InvokeAgentParams(prompt)
        return str(await self._peer.call(ContextMethod.INVOKE_AGENT, params.to_wire()))

    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: StreamCallback | None = None,
        on_tool_call: StreamCallback | None = None,
    ) -> str:
        stream_id = next(self._ids)
        self.streams[stream_id] = (on_chunk, on_tool_call)
        try:
            params = InvokeStreamedParams(prompt, stream_id)
            method = ContextMethod.INVOKE_AGENT_STREAMED
            return str(await self._peer.call(method, params.to_wire()))
        finally:
            self.streams.pop(stream_id, None)

    async def enrich_prompt(self, prompt: str, agent_id: str | None = None) -> str:
        params = EnrichPromptParams(prompt, agent_id)
        return str(await self._peer.call(ContextMethod.ENRICH_PROMPT, params.to_wire()))

    # ------------------------------------------------------------ state

    async def get_state(
        self, key: str, default: Any = None, *, scope: StateScope = "session"
    ) -> Any:
        params = GetStateParams(check_key(key), scope, state_session(scope))
        answer = await self._peer.call(ContextMethod.GET_STATE, params.to_wire())
        found = StateValue.from_wire(answer, ContextMethod.GET_STATE)
        return found.value if found.found else default

    async def set_state(self, key: str, value: Any, *, scope: StateScope = "session") -> None:
        encode_value(check_key(key), value)  # a TypeError here, not a frame the kernel refuses
        params = SetStateParams(key, value, scope, state_session(scope))
        await self._peer.call(ContextMethod.SET_STATE, params.to_wire())

    async def delete_state(self, key: str, *, scope: StateScope = "session") -> None:
        params = DeleteStateParams(check_key(key), scope, state_session(scope))
        await self._peer.call(ContextMethod.DELETE_STATE, params.to_wire())

    async def clear_state(self, *, scope: StateScope = "session") -> None:
        params = ClearStateParams(scope, state_session(scope))
        await self._peer.call(ContextMethod.CLEAR_STATE, params.to_wire())

    # ------------------------------------------------------------ system

    def request_restart(self) -> None:
        self._require_control("restart Hearth")
        self._peer.notify_nowait(Notice.REQUEST_RESTART)

    def request_shutdown(self) -> None:
        self._require_control("shut Hearth down")
        self._peer.notify_nowait(Notice.REQUEST_SHUTDOWN)

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
            params = LogParams(record.levelno, record.name, text)
            self._peer.notify_nowait(Notice.LOG, params.to_wire())
        except Exception:
            self.handleError(record)
