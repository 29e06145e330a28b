"""Hook calls across the process boundary (SPEC §9): arguments out, tagged results back.

Kernel → host: a hook's arguments, positionally, with ``TurnContext``,
``ToolCall`` and ``TurnOutcome`` as objects of their fields. Host → kernel:
``null`` or one tagged object per contract value, e.g. ``{"type":
"short_circuit", "reply": "…"}``. The kernel decodes strictly: each hook
accepts only the result types its protocol returns, each type exactly its
fields (``wire.py``), so a hostile host can neither crash the kernel nor
pass one value off as another — ``decode_hook_result`` raises
``HookResultError`` and the kernel's ``HookCaller`` skips the hook. Light:
the plugin host imports this before the extension.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.extensions.contract.data import (
    Annotated,
    CompactionPlan,
    GuardrailTrip,
    ModelRoute,
    ShortCircuit,
    ToolCall,
    ToolDecision,
    TurnContext,
    TurnOutcome,
)
from core.extensions.contract.hook_specs import HOOK_SPECS, ArgKind, HookSpec
from core.extensions.isolation.protocol.errors import HookResultError
from core.extensions.isolation.protocol.wire import FrameError, Wire, plain

__all__ = [
    "HOOK_METHODS",
    "MAX_HOOK_MESSAGES",
    "decode_hook_result",
    "encode_hook_result",
    "hook_args_from_wire",
    "hook_args_to_wire",
]

MAX_HOOK_MESSAGES = 1000  # items in one returned message list (a turn's input is a few)

# --------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class TextResult(Wire):
    """A rewritten text (``on_plain_text``, ``on_tag``, ``on_llm_output``, ``after_tool_call``)."""

    type: Literal["text"]
    text: str

    def value(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class MessagesResult(Wire):
    """``on_input_messages``' new list; capped, a turn's input being a few items."""

    type: Literal["messages"]
    messages: list[dict[str, Any]]

    def __post_init__(self) -> None:
        if len(self.messages) > MAX_HOOK_MESSAGES:
            raise FrameError(f"messages: {len(self.messages)} items, more than {MAX_HOOK_MESSAGES}")

    def value(self) -> list[dict[str, Any]]:
        return self.messages


@dataclass(frozen=True, slots=True)
class ShortCircuitResult(Wire):
    """``on_input_messages`` answering the user itself."""

    type: Literal["short_circuit"]
    reply: str

    def value(self) -> ShortCircuit:
        return ShortCircuit(self.reply)


@dataclass(frozen=True, slots=True)
class ToolDecisionResult(Wire):
    """``before_tool_call``'s allow / deny / modify."""

    type: Literal["tool_decision"]
    action: Literal["allow", "deny", "modify"]
    reason: str = ""
    arguments: dict[str, Any] | None = None

    def value(self) -> ToolDecision:
        return ToolDecision(self.action, self.reason, self.arguments)


@dataclass(frozen=True, slots=True)
class AnnotatedResult(Wire):
    """New text (or none) plus annotations for the turn's frames."""

    type: Literal["annotated"]
    text: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)

    def value(self) -> Annotated:
        return Annotated(self.text, self.annotations)


@dataclass(frozen=True, slots=True)
class ModelRouteResult(Wire):
    """``route_model``'s proposal."""

    type: Literal["model_route"]
    model: str
    reason: str = ""

    def value(self) -> ModelRoute:
        return ModelRoute(self.model, self.reason)


@dataclass(frozen=True, slots=True)
class GuardrailTripResult(Wire):
    """A guardrail stopping the turn."""

    type: Literal["guardrail_trip"]
    reason: str
    message: str = ""

    def value(self) -> GuardrailTrip:
        return GuardrailTrip(self.reason, self.message)


@dataclass(frozen=True, slots=True)
class CompactionPlanResult(Wire):
    """``on_compaction``'s instructions or summary."""

    type: Literal["compaction_plan"]
    instructions: str | None = None
    summary: str | None = None

    def value(self) -> CompactionPlan:
        return CompactionPlan(self.instructions, self.summary)


ResultWire = (
    TextResult
    | MessagesResult
    | ShortCircuitResult
    | ToolDecisionResult
    | AnnotatedResult
    | ModelRouteResult
    | CompactionPlanResult
    | GuardrailTripResult
)
RESULT_TYPES: dict[str, type[ResultWire]] = {
    "text": TextResult,
    "messages": MessagesResult,
    "short_circuit": ShortCircuitResult,
    "tool_decision": ToolDecisionResult,
    "annotated": AnnotatedResult,
    "model_route": ModelRouteResult,
    "compaction_plan": CompactionPlanResult,
    "guardrail_trip": GuardrailTripResult,
}
# the contract values sent as their fields
_VALUE_TYPES: dict[type, str] = {
    ShortCircuit: "short_circuit",
    ToolDecision: "tool_decision",
    Annotated: "annotated",
    ModelRoute: "model_route",
    CompactionPlan: "compaction_plan",
    GuardrailTrip: "guardrail_trip",
}

# --------------------------------------------------------------------- per hook

HOOK_METHODS: dict[str, HookSpec] = {spec.method: spec for spec in HOOK_SPECS}


def _spec(name: str, args: Sequence[Any]) -> HookSpec:
    spec = HOOK_METHODS.get(name)
    if spec is None:
        raise LookupError(f"{name[:80]!r} is not a hook method")
    if len(args) != len(spec.args):
        raise TypeError(f"{name} takes {len(spec.args)} arguments, got {len(args)}")
    return spec


def hook_args_to_wire(name: str, args: Sequence[Any]) -> list[Any]:
    """The kernel's arguments for hook ``name`` as JSON values."""
    _spec(name, args)
    return [plain(a) for a in args]


_FROM_WIRE: dict[ArgKind, Callable[[Any], Any]] = {
    "turn": lambda data: TurnContext(**data),
    "outcome": lambda data: TurnOutcome(**data),
    "call": lambda data: ToolCall(**data),
    "messages": lambda data: [dict(m) for m in data],
    "text": str,
    "attrs": lambda data: {str(k): str(v) for k, v in data.items()},
}


def hook_args_from_wire(name: str, args: Sequence[Any]) -> list[Any]:
    """The host's view of the arguments: contract objects rebuilt from JSON."""
    spec = _spec(name, args)
    return [_FROM_WIRE[kind](arg) for kind, arg in zip(spec.args, args, strict=True)]


def encode_hook_result(name: str, value: Any) -> dict[str, Any] | None:
    """What the extension's hook returned, tagged; ``TypeError`` for a value its
    protocol does not return (the kernel then skips the hook, as in-process)."""
    spec = HOOK_METHODS[name]
    if value is None:
        return None
    if isinstance(value, str) and "text" in spec.results:
        return {"type": "text", "text": value}
    if isinstance(value, list) and "messages" in spec.results:
        return {"type": "messages", "messages": value}
    kind = _VALUE_TYPES.get(type(value))
    if kind is not None and kind in spec.results:
        return {"type": kind, **plain(value)}
    expected = " or ".join((*spec.results, "None"))
    raise TypeError(f"{name} returned a {type(value).__name__}; expected {expected}")


def decode_hook_result(ext_id: str, name: str, data: Any) -> Any:
    """The contract value a host's answer stands for, checked against hook ``name``.

    Raises ``HookResultError`` (naming extension, hook and what came) for an
    answer of another shape, of a type this hook does not return, or with a
    field missing, unknown or of the wrong type.
    """
    spec = HOOK_METHODS[name]
    if data is None:
        return None
    kind = data.get("type") if isinstance(data, dict) else None
    if not isinstance(kind, str):
        raise HookResultError(ext_id, name, f"{_kind(data)}, not a tagged result")
    if kind not in spec.results:
        allowed = ", ".join(spec.results) or "only null"
        raise HookResultError(ext_id, name, f"a {kind[:40]!r} result (allowed: {allowed})")
    try:
        return RESULT_TYPES[kind].from_wire(data, f"{kind} result").value()
    except FrameError as exc:
        raise HookResultError(ext_id, name, str(exc)) from None


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"
