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

from core.extensions.contract_data import StateScope
from core.extensions.isolation.wire import FrameError, Wire, decode

__all__ = [
    "HOST_REQUESTS",
    "KERNEL_NOTIFICATIONS",
    "KERNEL_REQUESTS",
    "AgentBackgroundParams",
    "AgentTaskParams",
    "CallToolParams",
    "CancelParams",
    "ClearStateParams",
    "CommandParams",
    "ContextMethod",
    "DeleteStateParams",
    "Described",
    "EmitParams",
    "Empty",
    "EnrichPromptParams",
    "EventParams",
    "FrameError",
    "GetStateParams",
    "HostMethod",
    "InvokeAgentParams",
    "InvokeParams",
    "InvokeStreamedParams",
    "LifecycleParams",
    "ListPostProcessorsParams",
    "LoadParams",
    "LogParams",
    "McpRequestParams",
    "Notice",
    "NotifyUserParams",
    "PingResult",
    "RequeueParams",
    "SetStateParams",
    "StateValue",
    "StreamKind",
    "StreamParams",
    "SubscribeParams",
    "UserMessageParams",
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


class ContextMethod(StrEnum):
    """Requests a plugin host sends to the kernel (``ExtensionContext`` calls)."""

    EMIT = "ctx.emit"
    NOTIFY_USER = "ctx.notify_user"
    REQUEST_AGENT_TASK = "ctx.request_agent_task"
    REQUEST_AGENT_BACKGROUND = "ctx.request_agent_background"
    ON_USER_MESSAGE = "ctx.on_user_message"
    ANSWER_REQUEST = "ctx.answer_request"
    UI_REQUEST = "ctx.ui_request"
    INVOKE_AGENT = "ctx.invoke_agent"
    INVOKE_AGENT_STREAMED = "ctx.invoke_agent_streamed"
    LIST_COMMANDS = "ctx.list_commands"
    LIST_POST_PROCESSORS = "ctx.list_post_processors"
    ENRICH_PROMPT = "ctx.enrich_prompt"
    GET_STATE = "ctx.get_state"
    SET_STATE = "ctx.set_state"
    DELETE_STATE = "ctx.delete_state"
    CLEAR_STATE = "ctx.clear_state"
    KERNEL_STATUS = "ctx.kernel_status"
    REQUEUE_DEAD_LETTER = "ctx.requeue_dead_letter"
    LEADERSHIP = "ctx.leadership"
    MCP_REQUEST = "ctx.mcp_request"


class Notice(StrEnum):
    """Notifications (no answer): ``$cancel`` both ways, the rest host → kernel."""

    CANCEL = "$cancel"
    SUBSCRIBE = "ctx.subscribe"
    LOG = "log"
    REQUEST_RESTART = "ctx.request_restart"
    REQUEST_SHUTDOWN = "ctx.request_shutdown"


StreamKind = Literal["chunk", "tool_call"]
MAX_TAG_PATTERNS = 64
MAX_TAG_PATTERN_CHARS = 64


# ------------------------------------------------------------ kernel -> host


@dataclass(frozen=True, slots=True)
class Empty(Wire):
    """Methods without parameters (``ping``, ``initialize``, ``ctx.list_commands``, …)."""


@dataclass(frozen=True, slots=True)
class LoadParams(Wire):
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
    # permissions.control: the host refuses request_restart/shutdown itself,
    # since a notification carries no refusal back
    control: bool = False


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


@dataclass(frozen=True, slots=True)
class EmitParams(Wire):
    topic: str
    payload: dict[str, Any]
    correlation_id: str | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True, slots=True)
class NotifyUserParams(Wire):
    text: str
    channel_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class AgentTaskParams(Wire):
    prompt: str
    channel_id: str | None = None


@dataclass(frozen=True, slots=True)
class AgentBackgroundParams(Wire):
    prompt: str
    correlation_id: str | None = None


@dataclass(frozen=True, slots=True)
class UserMessageParams(Wire):
    text: str
    user_id: str
    channel_id: str | None = None
    message_id: str | None = None
    idempotency_key: str | None = None
    sender_id: str | None = None


@dataclass(frozen=True, slots=True)
class UiRequestParams(Wire):
    kind: str
    prompt: str
    options: list[str] = field(default_factory=list)
    timeout_s: float | None = None
    # the token of the kernel's call the question belongs to, as the host received
    # it; the kernel finds the turn by it, never by what a host says (ADR 0043)
    served: str | None = None


@dataclass(frozen=True, slots=True)
class AnswerRequestParams(Wire):
    request_id: str
    answer: str
    user_id: str
    sender_id: str | None = None


@dataclass(frozen=True, slots=True)
class InvokeAgentParams(Wire):
    prompt: str


@dataclass(frozen=True, slots=True)
class InvokeStreamedParams(Wire):
    prompt: str
    stream: int


@dataclass(frozen=True, slots=True)
class EnrichPromptParams(Wire):
    prompt: str
    agent_id: str | None = None


# State: the extension id is the connection's, never a parameter; ``session_id``
# is the session of the turn the host is serving when the call is made.


@dataclass(frozen=True, slots=True)
class GetStateParams(Wire):
    key: str
    scope: StateScope = "session"
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class SetStateParams(Wire):
    key: str
    value: Any
    scope: StateScope = "session"
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteStateParams(Wire):
    key: str
    scope: StateScope = "session"
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClearStateParams(Wire):
    scope: StateScope = "session"
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class StateValue(Wire):
    """The kernel's answer to ``ctx.get_state``: a stored ``null`` is not "absent"."""

    found: bool
    value: Any = None


@dataclass(frozen=True, slots=True)
class RequeueParams(Wire):
    event_id: int


@dataclass(frozen=True, slots=True)
class McpRequestParams(Wire):
    op: str
    user_id: str
    name: str | None = None
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class ListPostProcessorsParams(Wire):
    user_id: str
    channel_id: str | None = None


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

KERNEL_REQUESTS: dict[str, type[Wire]] = {
    ContextMethod.EMIT: EmitParams,
    ContextMethod.NOTIFY_USER: NotifyUserParams,
    ContextMethod.REQUEST_AGENT_TASK: AgentTaskParams,
    ContextMethod.REQUEST_AGENT_BACKGROUND: AgentBackgroundParams,
    ContextMethod.ON_USER_MESSAGE: UserMessageParams,
    ContextMethod.ANSWER_REQUEST: AnswerRequestParams,
    ContextMethod.UI_REQUEST: UiRequestParams,
    ContextMethod.INVOKE_AGENT: InvokeAgentParams,
    ContextMethod.INVOKE_AGENT_STREAMED: InvokeStreamedParams,
    ContextMethod.LIST_COMMANDS: Empty,
    ContextMethod.LIST_POST_PROCESSORS: ListPostProcessorsParams,
    ContextMethod.ENRICH_PROMPT: EnrichPromptParams,
    ContextMethod.GET_STATE: GetStateParams,
    ContextMethod.SET_STATE: SetStateParams,
    ContextMethod.DELETE_STATE: DeleteStateParams,
    ContextMethod.CLEAR_STATE: ClearStateParams,
    ContextMethod.KERNEL_STATUS: Empty,
    ContextMethod.REQUEUE_DEAD_LETTER: RequeueParams,
    ContextMethod.LEADERSHIP: Empty,
    ContextMethod.MCP_REQUEST: McpRequestParams,
}

KERNEL_NOTIFICATIONS: dict[str, type[Wire]] = {
    Notice.SUBSCRIBE: SubscribeParams,
    Notice.LOG: LogParams,
    Notice.REQUEST_RESTART: Empty,
    Notice.REQUEST_SHUTDOWN: Empty,
}
