"""The turn pipeline's hook points (SPEC §9), one ``@runtime_checkable`` protocol each.

An extension implements any subset; the loader detects each with
``isinstance`` like the other capabilities, so an extension that defines
none costs nothing on a turn. Method names, arguments and return
conventions are public. Returning ``None`` always means "unchanged" /
"allow"; every call has a deadline (``hooks.timeout_s``) and a hook that
raises or is late is skipped with the data unchanged. Order: manifest
``priority`` (0–100, default 50) descending, ties in load order.
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


@runtime_checkable
class TurnStartHook(Protocol):
    """Observes a turn beginning (who, channel, session in ``turn``)."""

    async def on_turn_start(self, turn: TurnContext) -> None: ...


@runtime_checkable
class TurnEndHook(Protocol):
    """Observes a turn ending: its status, reply and duration."""

    async def on_turn_end(self, turn: TurnContext, outcome: TurnOutcome) -> None: ...


@runtime_checkable
class SessionStartHook(Protocol):
    """Observes the first turn of a conversation's session (new, or after ``/new``)."""

    async def on_session_start(self, turn: TurnContext) -> None: ...


@runtime_checkable
class SessionEndHook(Protocol):
    """Observes a session ending: ``reason`` is ``new`` (the user sent ``/new``) or
    ``expired`` (quiet longer than ``turns.session_idle_timeout_s``)."""

    async def on_session_end(self, turn: TurnContext, reason: str) -> None: ...


@runtime_checkable
class InputMessagesHook(Protocol):
    """Rewrites the new input items before the model sees them, or answers instead.

    Chained: each hook receives the previous one's list. Returning
    ``ShortCircuit(reply)`` sends ``reply`` with no model call.
    """

    async def on_input_messages(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> list[dict[str, Any]] | ShortCircuit | None: ...


@runtime_checkable
class PlainTextHook(Protocol):
    """Rewrites text on its way to the model (``in``) and to the user (``out``)."""

    async def on_plain_text(
        self, text: str, direction: Literal["in", "out"], turn: TurnContext
    ) -> str | None: ...


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


@runtime_checkable
class LlmOutputHook(Protocol):
    """Rewrites the final answer before it is shown (the original stays in the journal)."""

    async def on_llm_output(self, output: str, turn: TurnContext) -> str | Annotated | None: ...


@runtime_checkable
class BeforeToolCallHook(Protocol):
    """Allows, denies or modifies every tool call, whoever provides the tool."""

    async def before_tool_call(self, call: ToolCall, turn: TurnContext) -> ToolDecision | None: ...


@runtime_checkable
class AfterToolCallHook(Protocol):
    """Rewrites or annotates a tool's result before the model reads it."""

    async def after_tool_call(
        self, call: ToolCall, result: str, turn: TurnContext
    ) -> str | Annotated | None: ...


@runtime_checkable
class ModelRoutingHook(Protocol):
    """Proposes the model for this turn: logged, and used when ``hooks.routing``
    lets this extension decide."""

    async def route_model(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> ModelRoute | None: ...


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


@runtime_checkable
class InputGuardrailHook(Protocol):
    """Checks the user's message before the orchestrator's model answers it (seed 004):
    a ``GuardrailTrip`` ends the turn with its message; ``None`` lets it through."""

    async def check_input(self, text: str, turn: TurnContext) -> GuardrailTrip | None: ...


@runtime_checkable
class OutputGuardrailHook(Protocol):
    """Checks the orchestrator's final answer before the user sees it (seed 004):
    a ``GuardrailTrip`` replaces it with the trip's message; ``None`` lets it through."""

    async def check_output(self, text: str, turn: TurnContext) -> GuardrailTrip | None: ...
