"""Plain data crossing the extension boundary (re-exported by ``contract``).

Frozen dataclasses of JSON-friendly fields, so an isolated extension (SPEC
§6) can ship them over JSON-RPC unchanged. The hook values at the end
(``ShortCircuit``, ``ToolCall``, ``ToolDecision`` …) are what the turn
pipeline's hooks (SPEC §9) receive and return.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "AgentDescriptor",
    "AgentInvocationContext",
    "AgentResponse",
    "Annotated",
    "Command",
    "CommandHandler",
    "CompactionPlan",
    "GuardrailTrip",
    "Leadership",
    "McpAnswer",
    "McpOp",
    "ModelRoute",
    "RequestOption",
    "ShortCircuit",
    "StateScope",
    "StoreLocation",
    "ToolCall",
    "ToolDecision",
    "TurnContext",
    "TurnOutcome",
    "UserRequest",
]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """Who a turn is for; passed to context providers, command handlers and hooks.

    ``turn_id`` names one turn (the frames of its hook decisions carry it):
    the ledger key of the message it answers, or a fresh id for an agent run.
    ``sender_id`` is who typed the message when ``user_id`` addresses a group
    (a Telegram group chat); ``None`` when the address is the person.

    ``person`` and ``role`` say which person of the household (settings
    ``people:``, SPEC §11) the turn is for; the kernel resolves them once
    per turn from the channel and the sender. Key a person's data by
    ``person_key``, never by ``user_id``: one person on several channels is
    one person, and two people in one chat are two. A context with no
    person (a scheduled or background run) is the owner's.
    """

    agent_id: str = "orchestrator"
    channel_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    sender_id: str | None = None
    person: str | None = None
    role: Literal["owner", "member"] = "owner"

    @property
    def person_key(self) -> str | None:
        """Whose data the turn reads and writes: ``None`` for the owner (the data
        kept before people existed stays theirs), the person's name for a member."""
        return None if self.role == "owner" else (self.person or "")


# which state a state call addresses: the extension's in the current turn's
# session, or the extension's own across sessions
StateScope = Literal["session", "extension"]


@dataclass(frozen=True, slots=True)
class AgentDescriptor:
    """Metadata the orchestrator uses to decide when to call an agent."""

    name: str
    description: str
    integration_mode: Literal["tool", "handoff"] = "tool"


@dataclass(frozen=True, slots=True)
class AgentInvocationContext:
    """Optional context for an agent invocation (who asked, prior messages)."""

    conversation_summary: str | None = None
    user_message: str | None = None
    correlation_id: str | None = None
    turn: TurnContext | None = None


@dataclass(frozen=True, slots=True)
class AgentResponse:
    """Structured result of ``AgentProvider.invoke``; never an exception."""

    status: Literal["success", "error", "refused"]
    content: str
    error: str | None = None
    tokens_used: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


CommandHandler = Callable[[str, TurnContext], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Command:
    """A slash command (``/name args``) answered without any model call.

    ``name`` is given without the leading slash. The handler receives the
    text after the name (stripped) and returns the reply; ``None`` makes the
    kernel answer ``Done.`` (every command gets exactly one answer).
    """

    name: str
    description: str
    handler: CommandHandler


# ------------------------------------------------------------------ hook values


@dataclass(frozen=True, slots=True)
class ShortCircuit:
    """Returned by ``on_input_messages``: answer the user with ``reply``, no model call.

    The user's message and the reply are stored in the history like any turn.
    """

    reply: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call the model made: the tool's name, its parsed arguments, the call id."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """A ``before_tool_call`` answer: ``allow()``, ``deny(reason)`` or ``modify(arguments)``.

    A denial reaches the model as the tool's result (``denied by <extension>:
    <reason>``) so it can adapt. ``modify`` arguments are merged over the
    current ones (key by key) and checked against the tool's schema again.
    """

    action: Literal["allow", "deny", "modify"]
    reason: str = ""
    arguments: dict[str, Any] | None = None

    @classmethod
    def allow(cls) -> ToolDecision:
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> ToolDecision:
        return cls("deny", reason=reason)

    @classmethod
    def modify(cls, arguments: dict[str, Any]) -> ToolDecision:
        return cls("modify", arguments=dict(arguments))


@dataclass(frozen=True, slots=True)
class Annotated:
    """What ``on_llm_output`` / ``after_tool_call`` may return instead of a string:
    the new text (``None`` = unchanged) plus metadata recorded in the turn's frames."""

    text: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended, for ``on_turn_end``.

    ``status``: ``answered`` (the model replied), ``short_circuit`` (a hook
    replied), ``failed`` (an apology or error line was sent), ``timeout``,
    ``blocked`` (a guardrail tripped; the user got its message), or
    ``cancelled`` (the user stopped it, e.g. Ctrl-C in the terminal).
    """

    status: Literal["answered", "short_circuit", "failed", "timeout", "blocked", "cancelled"]
    reply: str
    duration_ms: float


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """A routing hook's proposal: a model name as ``agent.model`` takes it
    (``provider/model`` or a model of the default provider), and why."""

    model: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """A compaction hook's answer: ``instructions`` for the default summary, or the
    ``summary`` itself (which replaces the model's)."""

    instructions: str | None = None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class GuardrailTrip:
    """A guardrail's verdict that the turn must stop (seed 004): ``reason`` is
    journaled for the operator; ``message`` is what the user reads instead of
    an answer (plain words; empty: a generic one)."""

    reason: str
    message: str = ""


# ------------------------------------------------------------------ questions to the user


@dataclass(frozen=True, slots=True)
class RequestOption:
    """One answer a ``UserRequest`` offers: the ``value`` sent back, the ``label`` shown."""

    value: str
    label: str


@dataclass(frozen=True, slots=True)
class UserRequest:
    """A question for the user (seed 003 "UI requests"), rendered by the channel.

    ``kind``: ``approval`` (a tool call waits: options ``once``, ``always``,
    ``deny``), ``confirm`` (``yes`` / ``no``), ``select`` (one of ``options``)
    ``input`` (free text) or ``secret`` (free text a channel does not show
    or keep, and the kernel never records). ``id`` is short, so typing ``/approve ID`` on a
    phone is bearable. ``owner_id``, when set, is the only sender whose answer
    counts (in a group chat, the member who asked); otherwise whoever the
    channel's address is. The answer comes back through
    ``ExtensionContext.answer_request(id, value, user_id, sender_id=...)``.
    """

    id: str
    kind: Literal["approval", "confirm", "select", "input", "secret"]
    prompt: str
    options: tuple[RequestOption, ...] = ()
    owner_id: str | None = None
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where an extension's own databases go (``context.storage``, ADR 0035): SQLite
    files in ``data_dir``, or — with ``storage.backend: postgres``, in-process
    extensions only — a schema of its own in the kernel's PostgreSQL database.
    The library's ``Store.at(context.storage, FILE)`` picks the right one."""

    data_dir: Path
    backend: Literal["sqlite", "postgres"] = "sqlite"
    postgres_dsn: str | None = None
    extension_id: str = ""


@dataclass(frozen=True, slots=True)
class Leadership:
    """Whether this kernel process fires schedules now (``context.leadership()``, ADR 0036).

    With one process (SQLite) it always leads and ``recheck_s`` is ``None``. With
    several on PostgreSQL one holds the lease; every scheduler looks again at
    least every ``recheck_s`` seconds, to take over from a dead leader and to see
    schedules another process added."""

    leader: bool
    recheck_s: float | None = None


McpOp = Literal["list", "call", "resource"]


@dataclass(frozen=True, slots=True)
class McpAnswer:
    """The kernel's answer to an MCP request of an extension's client
    (``ExtensionContext.mcp_request``, ADR 0059): ``text`` (a tool's result or a
    resource), ``error`` when it failed, ``tools`` for ``list`` — each
    ``{"name", "description", "schema", "effect"}`` — as ``main.py mcp`` gets them."""

    text: str = ""
    error: str | None = None
    tools: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "error": self.error, "tools": list(self.tools)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> McpAnswer:
        return cls(str(data["text"]), data.get("error"), tuple(data.get("tools") or ()))
