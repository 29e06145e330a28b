"""The turn pipeline's hook points (SPEC §9), one ``@runtime_checkable`` protocol each.

An extension implements any subset; the loader detects each with
``isinstance`` like the other capabilities, so an extension that defines
none costs nothing on a turn. Method names, arguments and return
conventions are public. Returning ``None`` always means "unchanged" /
"allow"; every call has a deadline (``hooks.timeout_s``) and a hook that
raises or is late is skipped with the data unchanged. Order: manifest
``priority`` (0–100, default 50) descending, ties in load order.

Each protocol is declared a hook point by its ``@hook_point`` row, here and
nowhere else (issue 42): ``hook_specs.HOOK_SPECS`` collects the rows in this
file's order, and the ``Capability`` members, the isolated proxy, the wire
codec, the settings' names and docs/hooks.md's table are built from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

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
from core.extensions.contract.hook_declaration import hook_point

__all__ = [
    "AfterToolCallHook",
    "BeforeToolCallHook",
    "CompactionHook",
    "InputGuardrailHook",
    "InputMessagesHook",
    "LlmOutputHook",
    "ModelRoutingHook",
    "OutputGuardrailHook",
    "PlainTextHook",
    "SessionEndHook",
    "SessionStartHook",
    "TagHook",
    "TurnEndHook",
    "TurnStartHook",
]


@hook_point("on_turn_start", ("turn",), command_event="TurnStart", when="a turn begins")
@runtime_checkable
class TurnStartHook(Protocol):
    """Observes a turn beginning (who, channel, session in ``turn``)."""

    async def on_turn_start(self, turn: TurnContext) -> None: ...


@hook_point(
    "on_turn_end",
    ("turn", "outcome"),
    command_event="Stop",
    when=(
        "a turn ended; `outcome.status` is `answered`, `short_circuit`, `failed`, `timeout` "
        "or `blocked` (a guardrail tripped), with `reply` and `duration_ms`. Told after the "
        "reply is recorded and sent (the user does not wait for it), before the "
        "conversation's next turn starts (ADR 0065)"
    ),
)
@runtime_checkable
class TurnEndHook(Protocol):
    """Observes a turn ending: its status, reply and duration."""

    async def on_turn_end(self, turn: TurnContext, outcome: TurnOutcome) -> None: ...


@hook_point(
    "on_session_start",
    ("turn",),
    command_event="SessionStart",
    when="the first turn of a conversation, or the first after `/new` or an expiry",
)
@runtime_checkable
class SessionStartHook(Protocol):
    """Observes the first turn of a conversation's session (new, or after ``/new``)."""

    async def on_session_start(self, turn: TurnContext) -> None: ...


@hook_point(
    "on_session_end",
    ("turn", "text"),
    command_event="SessionEnd",
    when=(
        'the user sent `/new` (`reason == "new"`), or the conversation was quiet longer '
        'than `turns.session_idle_timeout_s` (`"expired"`, at its next message)'
    ),
)
@runtime_checkable
class SessionEndHook(Protocol):
    """Observes a session ending: ``reason`` is ``new`` (the user sent ``/new``) or
    ``expired`` (quiet longer than ``turns.session_idle_timeout_s``)."""

    async def on_session_end(self, turn: TurnContext, reason: str) -> None: ...


@hook_point(
    "on_input_messages",
    ("messages", "turn"),
    ("messages", "short_circuit"),
    "chain",
    command_event="UserPromptSubmit",
    when='the new input items (`[{"role": "user", "content": ...}]`) before the model sees them',
    returns="a new list, or `ShortCircuit(reply)` to answer with no model call",
)
@runtime_checkable
class InputMessagesHook(Protocol):
    """Rewrites the new input items before the model sees them, or answers instead.

    Chained: each hook receives the previous one's list. Returning
    ``ShortCircuit(reply)`` sends ``reply`` with no model call.
    """

    async def on_input_messages(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> list[dict[str, Any]] | ShortCircuit | None: ...


@hook_point(
    "on_plain_text",
    ("text", "text", "turn"),
    ("text",),
    "chain",
    command_event="PlainText",
    when=(
        'the user\'s text on its way to the model (`"in"`), the answer on its way to the '
        'user (`"out"`)'
    ),
    returns="new `str`",
)
@runtime_checkable
class PlainTextHook(Protocol):
    """Rewrites text on its way to the model (``in``) and to the user (``out``)."""

    async def on_plain_text(
        self, text: str, direction: Literal["in", "out"], turn: TurnContext
    ) -> str | None: ...


@hook_point(
    "on_tag",
    ("text", "attrs", "text", "turn"),
    ("text",),
    "first",
    attributes=("tag_patterns",),
    when=(
        'the answer contains `<tag attr="v">inner</tag>` of a registered name (`"weather"` '
        'exact, `"ui:*"` prefix)'
    ),
    returns="the text that replaces the whole section",
)
@runtime_checkable
class TagHook(Protocol):
    """Renders ``<tag attr="v">inner</tag>`` sections of the model's answer.

    ``tag_patterns``: exact names (``weather``) or prefixes (``ui:*``). The
    result replaces the whole section; nested registered tags are rendered
    innermost first, so ``inner`` holds their results.
    """

    tag_patterns: Sequence[str]

    async def on_tag(
        self, tag: str, attrs: dict[str, str], inner: str, turn: TurnContext
    ) -> str | None: ...


@hook_point(
    "on_llm_output",
    ("text", "turn"),
    ("text", "annotated"),
    "chain",
    command_event="LlmOutput",
    when="the final answer, after tags, before it is shown",
    returns="new `str`, or `Annotated(text, annotations)`",
)
@runtime_checkable
class LlmOutputHook(Protocol):
    """Rewrites the final answer before it is shown (the original stays in the journal)."""

    async def on_llm_output(self, output: str, turn: TurnContext) -> str | Annotated | None: ...


@hook_point(
    "before_tool_call",
    ("call", "turn"),
    ("tool_decision",),
    "chain",
    command_event="PreToolUse",
    when="before any tool runs: `call.name`, `call.arguments` (dict), `call.call_id`",
    returns="`ToolDecision.allow()`, `.deny(reason)` or `.modify(arguments)`",
)
@runtime_checkable
class BeforeToolCallHook(Protocol):
    """Allows, denies or modifies every tool call, whoever provides the tool."""

    async def before_tool_call(self, call: ToolCall, turn: TurnContext) -> ToolDecision | None: ...


@hook_point(
    "after_tool_call",
    ("call", "text", "turn"),
    ("text", "annotated"),
    "chain",
    command_event="PostToolUse",
    when="after a tool ran, before the model reads `result`",
    returns="new `str`, or `Annotated(text, annotations)`",
)
@runtime_checkable
class AfterToolCallHook(Protocol):
    """Rewrites or annotates a tool's result before the model reads it."""

    async def after_tool_call(
        self, call: ToolCall, result: str, turn: TurnContext
    ) -> str | Annotated | None: ...


@hook_point(
    "route_model",
    ("messages", "turn"),
    ("model_route",),
    "advise",
    when="before the model is called",
    returns="`ModelRoute(model, reason)`",
)
@runtime_checkable
class ModelRoutingHook(Protocol):
    """Proposes the model for this turn: logged, and used when ``hooks.routing``
    lets this extension decide."""

    async def route_model(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> ModelRoute | None: ...


@hook_point(
    "on_compaction",
    ("messages", "turn"),
    ("compaction_plan",),
    "first",
    when="a long history is about to be summarised",
    returns="`CompactionPlan(instructions=…)` or `CompactionPlan(summary=…)`",
)
@runtime_checkable
class CompactionHook(Protocol):
    """Shapes a history compaction: instructions for the summary, or the summary.

    ``items`` are the oldest history items, about to be replaced by one
    summary. Hooks run in priority order; the first ``summary`` wins (an
    empty one drops the items unsummarised) and ends the chain; otherwise
    every hook's ``instructions`` are added to the model's summary prompt.
    """

    async def on_compaction(
        self, items: list[dict[str, Any]], turn: TurnContext
    ) -> CompactionPlan | None: ...


@hook_point(
    "check_input",
    ("text", "turn"),
    ("guardrail_trip",),
    "first",
    when="guardrail: the user's newest message, before the model starts",
    returns="`GuardrailTrip(reason, message)` ends the turn",
)
@runtime_checkable
class InputGuardrailHook(Protocol):
    """Checks the user's message before the orchestrator's model answers it (seed 004):
    a ``GuardrailTrip`` ends the turn with its message; ``None`` lets it through."""

    async def check_input(self, text: str, turn: TurnContext) -> GuardrailTrip | None: ...


@hook_point(
    "check_output",
    ("text", "turn"),
    ("guardrail_trip",),
    "first",
    when="guardrail: the final answer, before the user sees it",
    returns="`GuardrailTrip(reason, message)` replaces it",
)
@runtime_checkable
class OutputGuardrailHook(Protocol):
    """Checks the orchestrator's final answer before the user sees it (seed 004):
    a ``GuardrailTrip`` replaces it with the trip's message; ``None`` lets it through."""

    async def check_output(self, text: str, turn: TurnContext) -> GuardrailTrip | None: ...
