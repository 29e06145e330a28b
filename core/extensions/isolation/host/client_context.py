"""``ExtensionContext`` inside a plugin host: a client of the kernel's context.

Everything that needs the kernel (events, agents, users, state) is an RPC to
the kernel, which enforces the manifest and answers refusals with an error the
extension sees as ``PermissionDeniedError``. Those calls are not written here
one by one: ``forwarding`` gives the class one method per call of the
contract's protocol (``context_calls``, ADR 0050), with the protocol's
signature. Written here are only the members declared as exceptions there:
what is served locally from what the kernel sent at load (config, declared
secrets, data dir); ``subscribe_event``, checked here too, so a refused
subscription raises at the call like in-process, and again in the kernel,
which decides; the calls whose callbacks stay here (streams) or that carry
what an in-process call finds in its task (the served call's token, the
turn's session). ``services`` is a registry of this host's own (objects cannot
cross the process boundary), with the kernel's rules. A bad state key, a
value that is not JSON or session scope outside a turn fail here, at the call.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar, get_type_hints

from core.events.topics import pattern_within
from core.extensions.access.state_scope import check_key, encode_value, state_session
from core.extensions.context.shared_services import ExtensionServices, ServiceRegistry
from core.extensions.contract import EventHandler, StateScope, StoreLocation
from core.extensions.errors import NotAvailableError, PermissionDeniedError, SecretNotDeclaredError
from core.extensions.isolation.protocol.context_calls import (
    CONTEXT_CALLS,
    CONTEXT_CALLS_BY_NAME,
    HOST_SERVED,
    RESHAPED,
    ContextCall,
)
from core.extensions.isolation.protocol.messages import (
    LoadParams,
    LogParams,
    Notice,
    StateValue,
    SubscribeParams,
)
from core.extensions.isolation.protocol.rpc import RpcPeer

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


C = TypeVar("C")


def forwarding(cls: type[C], calls: Mapping[str, ContextCall] = CONTEXT_CALLS) -> type[C]:
    """Give ``cls`` a forwarding method for every context call it does not define
    itself; ``TypeError`` at import for a member declared as served in the host or
    reshaped (``context_calls``) that it does not define."""
    defined = {name for klass in cls.__mro__[:-1] for name in vars(klass)}
    unwritten = sorted((HOST_SERVED | set(RESHAPED)) - defined)
    if unwritten:
        raise TypeError(f"{cls.__qualname__} must define {', '.join(unwritten)} itself")
    for call in calls.values():
        if call.name not in defined:
            setattr(cls, call.name, _forwarder(cls.__qualname__, call))
    return cls


def _forwarder(owner: str, call: ContextCall) -> Callable[..., Any]:
    """``call`` sent to the kernel: a request whose answer is rebuilt, or a notice."""
    method, bind, result = call.method, call.bind, call.result
    send: Callable[..., Any]
    if call.notice:

        def send(self: ClientContext, *args: Any, **kwargs: Any) -> None:
            self._peer.notify_nowait(method, bind(args, kwargs))

    else:

        async def send(self: ClientContext, *args: Any, **kwargs: Any) -> Any:
            return result(await self._peer.call(method, bind(args, kwargs)))

    send.__name__ = call.name
    send.__qualname__ = f"{owner}.{call.name}"
    send.__doc__ = call.function.__doc__ or f"``{call.name}``, served by the kernel."
    send.__signature__ = inspect.signature(call.function)  # type: ignore[union-attr]
    send.__annotations__ = get_type_hints(call.function)
    return send


@forwarding
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

    # ------------------------------------------------------------ served here

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

    def subscribe_event(self, topic: str, handler: EventHandler) -> None:
        if not any(pattern_within(topic, p) for p in self._params.subscribe):
            raise PermissionDeniedError(self.extension_id, f"subscribe to {topic!r}")
        handler_id = next(self._ids)
        self.handlers[handler_id] = handler
        name = getattr(handler, "__qualname__", type(handler).__name__)
        params = SubscribeParams(topic, handler_id, name)
        self._peer.notify_nowait(Notice.SUBSCRIBE, params.to_wire())

    # ------------------------------------------------------------ reshaped calls

    async def _call(self, name: str, payload: dict[str, Any]) -> Any:
        call = CONTEXT_CALLS_BY_NAME[name]
        return call.result(await self._peer.call(call.method, payload))

    async def ui_request(
        self,
        kind: str,
        prompt: str,
        options: Sequence[str] = (),
        *,
        timeout_s: float | None = None,
    ) -> str | None:
        payload = {
            "kind": kind,
            "prompt": prompt,
            "options": [str(o) for o in options],
            "timeout_s": timeout_s,
            "served": SERVED_TOKEN.get(),  # the kernel asks in the turn of this call
        }
        answer: str | None = await self._call("ui_request", payload)
        return answer

    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: StreamCallback | None = None,
        on_tool_call: StreamCallback | None = None,
    ) -> str:
        stream_id = next(self._ids)
        self.streams[stream_id] = (on_chunk, on_tool_call)
        try:
            reply: str = await self._call(
                "invoke_agent_streamed", {"prompt": prompt, "stream": stream_id}
            )
            return reply
        finally:
            self.streams.pop(stream_id, None)

    async def get_state(
        self, key: str, default: Any = None, *, scope: StateScope = "session"
    ) -> Any:
        payload = {"key": check_key(key), "scope": scope, "session_id": state_session(scope)}
        answer = await self._call("get_state", payload)
        found = StateValue.from_wire(answer, "ctx.get_state")
        return found.value if found.found else default

    async def set_state(self, key: str, value: Any, *, scope: StateScope = "session") -> None:
        encode_value(check_key(key), value)  # a TypeError here, not a frame the kernel refuses
        payload = {"key": key, "value": value, "scope": scope, "session_id": state_session(scope)}
        await self._call("set_state", payload)

    async def delete_state(self, key: str, *, scope: StateScope = "session") -> None:
        payload = {"key": check_key(key), "scope": scope, "session_id": state_session(scope)}
        await self._call("delete_state", payload)

    async def clear_state(self, *, scope: StateScope = "session") -> None:
        await self._call("clear_state", {"scope": scope, "session_id": state_session(scope)})

    # ------------------------------------------------------------ checked here too

    def request_restart(self) -> None:
        self._require_control("restart Hearth")
        self._notice("request_restart")

    def request_shutdown(self) -> None:
        self._require_control("shut Hearth down")
        self._notice("request_shutdown")

    def _notice(self, name: str) -> None:
        self._peer.notify_nowait(CONTEXT_CALLS_BY_NAME[name].method, {})

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
