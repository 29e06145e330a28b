"""The turn's hook points, called in order with the containment rules.

``TurnHooks`` is what the turn runner calls: lifecycle notices, the input
side (plain text ``in``, then ``on_input_messages`` chained, maybe a short
circuit), the output side (tags, then ``on_llm_output``, then plain text
``out``) and the routing proposal. Every method returns at once when no
extension implements its point. A change is journaled as a frame before it
takes effect; a hook that fails or is late changes nothing (``calls.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.extensions.contract import (
    InputMessagesHook,
    LlmOutputHook,
    ModelRoute,
    ModelRoutingHook,
    OutputGuardrailHook,
    PlainTextHook,
    SessionEndHook,
    SessionStartHook,
    ShortCircuit,
    TagHook,
    TurnContext,
    TurnEndHook,
    TurnOutcome,
    TurnStartHook,
)
from core.extensions.loading.capabilities import hook_capability
from core.kernel.hooks.calls import SKIPPED, HookCaller, kind_of
from core.kernel.hooks.frames import FrameRecorder
from core.kernel.hooks.registry import HookRegistry
from core.kernel.hooks.tags import render_tags

__all__ = ["RenderedOutput", "TurnHooks"]

log = logging.getLogger("core.kernel.hooks")

Messages = list[dict[str, Any]]

# the hook points called here
_TURN_START = hook_capability(TurnStartHook)
_TURN_END = hook_capability(TurnEndHook)
_SESSION_START = hook_capability(SessionStartHook)
_SESSION_END = hook_capability(SessionEndHook)
_INPUT_MESSAGES = hook_capability(InputMessagesHook)
_PLAIN_TEXT = hook_capability(PlainTextHook)
_TAG = hook_capability(TagHook)
_LLM_OUTPUT = hook_capability(LlmOutputHook)
_MODEL_ROUTING = hook_capability(ModelRoutingHook)
_OUTPUT_GUARDRAIL = hook_capability(OutputGuardrailHook)


@dataclass(frozen=True, slots=True)
class RenderedOutput:
    """The answer to show and the annotations hooks attached on the way."""

    text: str
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)


# the points a conversational turn passes (``TurnHooks.idle``: none has a hook)
TURN_POINTS = (
    _TURN_START,
    _TURN_END,
    _SESSION_START,
    _PLAIN_TEXT,
    _INPUT_MESSAGES,
    _TAG,
    _LLM_OUTPUT,
    _MODEL_ROUTING,
)


class TurnHooks:
    """Runs the turn-shaping hook points for the kernel's turn runner."""

    def __init__(
        self,
        registry: HookRegistry,
        caller: HookCaller,
        frames: FrameRecorder,
        *,
        authoritative_routing: Sequence[str] = (),
    ) -> None:
        self.registry = registry
        self.caller = caller
        self.frames = frames
        self.authoritative_routing = frozenset(authoritative_routing)

    def idle(self) -> bool:
        """Whether no hook is registered at any point of a turn (the wiring says, once
        per change): the turn runner then asks none of them (``TURN_POINTS``)."""
        at = self.registry.at
        for point in TURN_POINTS:
            if at(point):
                return False
        return True

    def shapes_output(self) -> bool:
        """Whether an output hook may rewrite the answer, or an output guardrail refuse
        it (then raw text is not streamed)."""
        at = self.registry.at
        return bool(at(_TAG) or at(_LLM_OUTPUT) or at(_PLAIN_TEXT) or at(_OUTPUT_GUARDRAIL))

    # ------------------------------------------------------------ lifecycle

    async def turn_started(self, turn: TurnContext) -> None:
        for entry in self.registry.at(_TURN_START):
            await self.caller.call(entry, "on_turn_start", turn, entry.target.on_turn_start(turn))

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        for entry in self.registry.at(_TURN_END):
            pending = entry.target.on_turn_end(turn, outcome)
            await self.caller.call(entry, "on_turn_end", turn, pending)

    async def session_started(self, turn: TurnContext) -> None:
        for entry in self.registry.at(_SESSION_START):
            pending = entry.target.on_session_start(turn)
            await self.caller.call(entry, "on_session_start", turn, pending)

    async def session_ended(self, turn: TurnContext, reason: str) -> None:
        for entry in self.registry.at(_SESSION_END):
            pending = entry.target.on_session_end(turn, reason)
            await self.caller.call(entry, "on_session_end", turn, pending)

    # ------------------------------------------------------------ input

    async def plain_text(
        self, text: str, direction: Literal["in", "out"], turn: TurnContext
    ) -> str:
        """``on_plain_text`` chained: each hook gets the previous one's text."""
        for entry in self.registry.at(_PLAIN_TEXT):
            result = await self.caller.call(
                entry, "on_plain_text", turn, entry.target.on_plain_text(text, direction, turn)
            )
            if result is SKIPPED or result is None:
                continue
            if not isinstance(result, str):
                self.caller.refuse(entry, "on_plain_text", turn, kind_of(result))
                continue
            if result != text:
                await self.frames.record(
                    "plain_text",
                    entry.owner,
                    "on_plain_text",
                    turn,
                    before=text,
                    after=result,
                    direction=direction,
                )
                text = result
        return text

    async def input_messages(
        self, messages: Messages, turn: TurnContext
    ) -> Messages | ShortCircuit:
        """``on_input_messages`` chained; a ``ShortCircuit`` ends the chain."""
        for entry in self.registry.at(_INPUT_MESSAGES):
            pending = entry.target.on_input_messages([dict(m) for m in messages], turn)
            result = await self.caller.call(entry, "on_input_messages", turn, pending)
            if result is SKIPPED or result is None:
                continue
            if isinstance(result, ShortCircuit):
                await self.frames.record(
                    "short_circuit",
                    entry.owner,
                    "on_input_messages",
                    turn,
                    before=messages,
                    after=result.reply,
                )
                return result
            checked = _messages_or_none(result)
            if checked is None:
                self.caller.refuse(
                    entry,
                    "on_input_messages",
                    turn,
                    "something other than a list of {role, content} messages",
                )
                continue
            if checked != messages:
                await self.frames.record(
                    "input",
                    entry.owner,
                    "on_input_messages",
                    turn,
                    before=messages,
                    after=checked,
                )
                messages = checked
        return messages

    # ------------------------------------------------------------ output

    async def render_output(self, output: str, turn: TurnContext) -> RenderedOutput:
        """Tags, then ``on_llm_output`` chained, then plain text ``out``."""
        annotations: dict[str, dict[str, Any]] = {}
        if self.registry.at(_TAG):
            output = await self._tags(output, turn)
        for entry in self.registry.at(_LLM_OUTPUT):
            result = await self.caller.call(
                entry, "on_llm_output", turn, entry.target.on_llm_output(output, turn)
            )
            text, notes = self.caller.text_and_notes(entry, "on_llm_output", turn, result)
            if notes:
                annotations[entry.owner] = notes
            if (text is not None and text != output) or notes:
                await self.frames.record(
                    "output",
                    entry.owner,
                    "on_llm_output",
                    turn,
                    before=output,
                    after=text if text is not None else output,
                    annotations=notes,
                )
            if text is not None:
                output = text
        if self.registry.at(_PLAIN_TEXT):
            output = await self.plain_text(output, "out", turn)
        return RenderedOutput(output, annotations)

    async def _tags(self, output: str, turn: TurnContext) -> str:
        entries = self.registry.at(_TAG)

        def registered(name: str) -> bool:
            return any(e.tags.matches(name) for e in entries)

        async def render_one(tag: str, attrs: dict[str, str], inner: str) -> str | None:
            replaced: str | None = None
            current = inner
            for entry in entries:
                if not entry.tags.matches(tag):
                    continue
                pending = entry.target.on_tag(tag, dict(attrs), current, turn)
                result = await self.caller.call(entry, "on_tag", turn, pending)
                if result is SKIPPED or result is None:
                    continue
                if not isinstance(result, str):
                    self.caller.refuse(entry, "on_tag", turn, kind_of(result))
                    continue
                await self.frames.record(
                    "tag",
                    entry.owner,
                    "on_tag",
                    turn,
                    before=current,
                    after=result,
                    tag=tag,
                    attrs=attrs,
                )
                replaced = current = result
            return replaced

        return await render_tags(output, registered, render_one)

    # ------------------------------------------------------------ routing

    async def route(self, messages: Messages, turn: TurnContext) -> str | None:
        """The model for this turn: the first proposal of an extension listed in
        ``hooks.authoritative_routing``; other proposals are only logged."""
        chosen: str | None = None
        for entry in self.registry.at(_MODEL_ROUTING):
            pending = entry.target.route_model([dict(m) for m in messages], turn)
            result = await self.caller.call(entry, "route_model", turn, pending)
            if result is SKIPPED or result is None:
                continue
            if not isinstance(result, ModelRoute) or not result.model:
                self.caller.refuse(entry, "route_model", turn, kind_of(result))
                continue
            decides = chosen is None and entry.owner in self.authoritative_routing
            log.info(
                "turn %s: %s proposes model %s (%s)%s",
                turn.turn_id or "-",
                entry.owner,
                result.model,
                result.reason or "no reason given",
                "; used" if decides else "; advisory",
            )
            await self.frames.record(
                "routing",
                entry.owner,
                "route_model",
                turn,
                before=None,
                after=result.model,
                reason=result.reason,
                mode="authoritative" if decides else "advisory",
            )
            if decides:
                chosen = result.model
        return chosen


def _messages_or_none(value: Any) -> Messages | None:
    """The list of message dicts a hook returned, or ``None`` if it is not one."""
    if not isinstance(value, list):
        return None
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value):
        return None
    return [dict(m) for m in value]
