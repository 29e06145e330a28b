"""The one table of the turn pipeline's hook points (SPEC §9; issue 27, ADR 0041).

Each row says, once, what a hook point is: its protocol (``hook_protocols``),
the method the kernel awaits, the kinds of its positional arguments and of
the results it may return besides ``None``, how several hooks at the point
combine, data its owner reports at load, the ``hooks.commands`` event name
when a program may implement it, and the permission it needs. Everything
else is built from this table: the capability detection (``capabilities``),
the settings' hook names (``settings``), the isolated proxy and the plugin
host (``isolation/hook_mixins``, ``isolation/host``), the wire codec
(``isolation/hook_wire``), the command-hook targets (``kernel/hooks/
command_hooks``) and the permission check (``capabilities.
require_permissions``). Adding a hook point means a protocol in
``hook_protocols`` (re-exported by ``contract``, named in the ``Capability``
enum), a row here, and the kernel code that calls it. Light: the plugin
host imports it before the extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from core.extensions.contract.hooks import (
    AfterToolCallHook,
    BeforeToolCallHook,
    CompactionHook,
    InputGuardrailHook,
    InputMessagesHook,
    LlmOutputHook,
    ModelRoutingHook,
    OutputGuardrailHook,
    PlainTextHook,
    SessionEndHook,
    SessionStartHook,
    TagHook,
    TurnEndHook,
    TurnStartHook,
)

__all__ = [
    "CONVERSATIONS",
    "HOOK_SPECS",
    "ArgKind",
    "Chaining",
    "HookSpec",
    "ResultKind",
]

# the wire shape of one argument (``isolation/hook_wire``): a ``TurnContext``, a
# ``TurnOutcome``, a ``ToolCall``, a list of message dicts, a string, string attributes
ArgKind = Literal["turn", "outcome", "call", "messages", "text", "attrs"]
# a contract value a hook may return besides None, by its wire tag
ResultKind = Literal[
    "text",
    "messages",
    "short_circuit",
    "tool_decision",
    "annotated",
    "model_route",
    "compaction_plan",
    "guardrail_trip",
]
# how the hooks at one point combine, in priority order:
# observe — each is told, answers are ignored; chain — each gets what the previous
# returned, and a stopping answer (ShortCircuit, deny) ends it; first — the first
# answer that is not None is used; advise — every answer is logged, and used only
# where settings let that extension decide (hooks.authoritative_routing)
Chaining = Literal["observe", "chain", "first", "advise"]

# the manifest permission that lets an extension see or change turns (SPEC §6)
CONVERSATIONS: Final = "conversations"


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook point: everything the kernel, the plugin host and the grant need."""

    protocol: type
    method: str
    args: tuple[ArgKind, ...]
    results: tuple[ResultKind, ...] = ()  # beside None; () for the observing hooks
    chaining: Chaining = "observe"
    attributes: tuple[str, ...] = ()  # sequences of strings its owner reports at load
    command_event: str | None = None  # ``hooks.commands`` may run a program for it
    permission: str = CONVERSATIONS

    @property
    def capability(self) -> str:
        """The public capability name (``extensions --json``, the plugin-host RPC)."""
        return self.protocol.__name__


HOOK_SPECS: tuple[HookSpec, ...] = (
    HookSpec(TurnStartHook, "on_turn_start", ("turn",), command_event="TurnStart"),
    HookSpec(TurnEndHook, "on_turn_end", ("turn", "outcome"), command_event="Stop"),
    HookSpec(SessionStartHook, "on_session_start", ("turn",), command_event="SessionStart"),
    HookSpec(SessionEndHook, "on_session_end", ("turn", "text"), command_event="SessionEnd"),
    HookSpec(
        InputMessagesHook,
        "on_input_messages",
        ("messages", "turn"),
        ("messages", "short_circuit"),
        "chain",
        command_event="UserPromptSubmit",
    ),
    HookSpec(
        PlainTextHook,
        "on_plain_text",
        ("text", "text", "turn"),
        ("text",),
        "chain",
        command_event="PlainText",
    ),
    HookSpec(
        TagHook,
        "on_tag",
        ("text", "attrs", "text", "turn"),
        ("text",),
        "first",
        attributes=("tag_patterns",),
    ),
    HookSpec(
        LlmOutputHook,
        "on_llm_output",
        ("text", "turn"),
        ("text", "annotated"),
        "chain",
        command_event="LlmOutput",
    ),
    HookSpec(
        BeforeToolCallHook,
        "before_tool_call",
        ("call", "turn"),
        ("tool_decision",),
        "chain",
        command_event="PreToolUse",
    ),
    HookSpec(
        AfterToolCallHook,
        "after_tool_call",
        ("call", "text", "turn"),
        ("text", "annotated"),
        "chain",
        command_event="PostToolUse",
    ),
    HookSpec(ModelRoutingHook, "route_model", ("messages", "turn"), ("model_route",), "advise"),
    HookSpec(CompactionHook, "on_compaction", ("messages", "turn"), ("compaction_plan",), "first"),
    HookSpec(InputGuardrailHook, "check_input", ("text", "turn"), ("guardrail_trip",), "first"),
    HookSpec(OutputGuardrailHook, "check_output", ("text", "turn"), ("guardrail_trip",), "first"),
)
