"""The RPC methods between kernel and plugin host, and one typed payload per method.

Both sides import this module: senders build a payload object and send
``to_wire()``; receivers turn what arrived into that object with
``decode(...)`` (``wire.py``), which refuses an unknown method, an unknown
or missing key and a value of the wrong type with a ``FrameError`` naming
the method, the key and what came instead. Frozen dataclasses rather than
pydantic: the plugin host imports this before the extension and must stay
light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from core.extensions.isolation.protocol.wire import FrameError, Wire, decode

__all__ = [
    "HOST_REQUESTS",
    "KERNEL_NOTIFICATIONS",
    "CallToolParams",
    "CancelParams",
    "CommandParams",
    "Described",
    "Empty",
    "EventParams",
    "FrameError",
    "HostMethod",
    "InvokeParams",
    "LifecycleParams",
    "LoadParams",
    "LogParams",
    "Notice",
    "PingResult",
    "Ready",
    "StateValue",
    "StreamKind",
    "StreamParams",
    "SubscribeParams",
    "Wire",
    "decode",
]


class HostMethod(StrEnum):
    """Requests the kernel sends to a plugin host."""

    PING = "ping"
    LOAD = "load"
    INITIALIZE = "initialize"
    LIFECYCLE = "lifecycle"
    INVOKE = "invoke"
    CALL_TOOL = "call_tool"
    COMMAND = "command"
    EVENT = "event"
    STREAM = "stream"


class Notice(StrEnum):
    """Notifications (no answer) besides the context's own (``context_calls``):
    ``$cancel`` both ways, the rest host → kernel."""

    CANCEL = "$cancel"
    SUBSCRIBE = "ctx.subscribe"
    LOG = "log"


StreamKind = Literal["chunk", "tool_call"]
MAX_TAG_PATTERNS = 64
MAX_TAG_PATTERN_CHARS = 64


# ------------------------------------------------------------ kernel -> host


@dataclass(frozen=True, slots=True)
class Empty(Wire):
    """Methods without parameters (``ping``, ``initialize``)."""


@dataclass(frozen=True, slots=True)
class LoadParams(Wire):
    """What the kernel sends a host at load: everything the extension may know."""

    ext_id: str
    ext_dir: str  # its directory (``context.extension_dir``)
    entrypoint: str
    data_dir: str
    abi_version: int  # the host ABI the kernel speaks (``HOST_ABI_VERSION``, ADR 0086)
    config: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str | None] = field(default_factory=dict)
    subscribe: list[str] = field(default_factory=lambda: ["*"])
    depends_on: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    # permissions.control: the host refuses request_restart/shutdown itself,
    # since a notification carries no refusal back
    control: bool = False
    # the snapshot of its code it is imported from (ADR 0073); "" (older kernels): ext_dir
    code_dir: str = ""


@dataclass(frozen=True, slots=True)
class Ready(Wire):
    """The host's answer to ``load``: the extension is imported, and the host ABI
    it speaks (the kernel refuses one that is not its own or that the manifest's
    ``requires_abi`` excludes)."""

    abi_version: int


@dataclass(frozen=True, slots=True)
class LifecycleParams(Wire):
    name: Literal["start", "stop", "destroy", "health_check"]


@dataclass(frozen=True, slots=True)
class InvokeParams(Wire):
    """A protocol method of the extension (``send_to_user``, ``get_context``, …)."""

    name: str
    args: list[Any] = field(default_factory=list)
    served: str | None = None  # the kernel's token for the turn served (``served_calls``)


@dataclass(frozen=True, slots=True)
class CallToolParams(Wire):
    name: str
    args: str = "{}"
    turn: dict[str, Any] | None = None
    call_id: str | None = None
    served: str | None = None


@dataclass(frozen=True, slots=True)
class CommandParams(Wire):
    name: str
    args: str = ""
    turn: dict[str, Any] | None = None
    served: str | None = None


@dataclass(frozen=True, slots=True)
class EventParams(Wire):
    handler: int
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StreamParams(Wire):
    stream: int
    kind: StreamKind
    text: str


@dataclass(frozen=True, slots=True)
class PingResult(Wire):
    """CPU seconds the host used so far, and when (its monotonic clock)."""

    cpu_s: float
    at: float


@dataclass(frozen=True, slots=True)
class Described(Wire):
    """The host's answer to ``initialize``: protocols and their synchronous data."""

    capabilities: list[str]
    tools: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    agent: dict[str, Any] | None = None
    context_priority: int = 100
    setup_schema: list[dict[str, Any]] = field(default_factory=list)
    tag_patterns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.tag_patterns) > MAX_TAG_PATTERNS:
            raise FrameError(f"tag_patterns: more than {MAX_TAG_PATTERNS} patterns")
        for pattern in self.tag_patterns:
            if not 0 < len(pattern) <= MAX_TAG_PATTERN_CHARS or not pattern.isprintable():
                raise FrameError(
                    f"tag_patterns: {pattern[:40]!r} is not a printable string of "
                    f"1 to {MAX_TAG_PATTERN_CHARS} characters"
                )


# ------------------------------------------------------------ host -> kernel
# The ``ctx.*`` calls' payloads are derived from ``ExtensionContext``
# (``context_calls``); these are the rest.


@dataclass(frozen=True, slots=True)
class StateValue(Wire):
    """The kernel's answer to ``ctx.get_state``: a stored ``null`` is not "absent"."""

    found: bool
    value: Any = None


@dataclass(frozen=True, slots=True)
class SubscribeParams(Wire):
    topic: str
    handler: int
    name: str


@dataclass(frozen=True, slots=True)
class LogParams(Wire):
    level: int
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class CancelParams(Wire):
    id: int | str


HOST_REQUESTS: dict[str, type[Wire]] = {
    HostMethod.PING: Empty,
    HostMethod.LOAD: LoadParams,
    HostMethod.INITIALIZE: Empty,
    HostMethod.LIFECYCLE: LifecycleParams,
    HostMethod.INVOKE: InvokeParams,
    HostMethod.CALL_TOOL: CallToolParams,
    HostMethod.COMMAND: CommandParams,
    HostMethod.EVENT: EventParams,
    HostMethod.STREAM: StreamParams,
}

KERNEL_NOTIFICATIONS: dict[str, type[Wire]] = {
    Notice.SUBSCRIBE: SubscribeParams,
    Notice.LOG: LogParams,
}
