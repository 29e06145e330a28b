"""One proxy mixin per hook protocol (SPEC §9): the turn pipeline's hooks over RPC.

Each method sends its arguments (``hook_wire.hook_args_to_wire``) and
decodes the host's tagged answer strictly (``decode_hook_result``): an
answer the hook cannot return raises ``HookResultError``, which the
kernel's ``HookCaller`` contains like any failing hook. The deadline is the
``HookCaller``'s (``hooks.timeout_s``); when it cancels a call the host is
told to cancel too and a late answer is dropped (``rpc.py``). A tag hook's
patterns were reported by the host at initialize.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

from core.extensions.capabilities import Capability
from core.extensions.contract import (
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
from core.extensions.isolation.hook_wire import decode_hook_result, hook_args_to_wire
from core.extensions.isolation.proxy_core import ProxyCore

__all__ = ["HOOK_MIXINS"]

Messages = list[dict[str, Any]]


async def forward(proxy: ProxyCore, name: str, *args: Any) -> Any:
    """Call hook ``name`` in the host; the decoded value is one ``name`` may return."""
    data = await proxy.call_method(name, *hook_args_to_wire(name, args))
    return decode_hook_result(proxy.ext_id, name, data)


class TurnStartProxy(ProxyCore):
    async def on_turn_start(self, turn: TurnContext) -> None:
        await forward(self, "on_turn_start", turn)


class TurnEndProxy(ProxyCore):
    async def on_turn_end(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        await forward(self, "on_turn_end", turn, outcome)


class SessionStartProxy(ProxyCore):
    async def on_session_start(self, turn: TurnContext) -> None:
        await forward(self, "on_session_start", turn)


class SessionEndProxy(ProxyCore):
    async def on_session_end(self, turn: TurnContext, reason: str) -> None:
        await forward(self, "on_session_end", turn, reason)


class InputMessagesProxy(ProxyCore):
    async def on_input_messages(
        self, messages: Messages, turn: TurnContext
    ) -> Messages | ShortCircuit | None:
        result = await forward(self, "on_input_messages", messages, turn)
        return cast(Messages | ShortCircuit | None, result)


class PlainTextProxy(ProxyCore):
    async def on_plain_text(
        self, text: str, direction: Literal["in", "out"], turn: TurnContext
    ) -> str | None:
        return cast(str | None, await forward(self, "on_plain_text", text, direction, turn))


class TagProxy(ProxyCore):
    @property
    def tag_patterns(self) -> Sequence[str]:
        return tuple(self.described.get("tag_patterns", ()))

    async def on_tag(
        self, tag: str, attrs: dict[str, str], inner: str, turn: TurnContext
    ) -> str | None:
        return cast(str | None, await forward(self, "on_tag", tag, attrs, inner, turn))


class LlmOutputProxy(ProxyCore):
    async def on_llm_output(self, output: str, turn: TurnContext) -> str | Annotated | None:
        return cast(str | Annotated | None, await forward(self, "on_llm_output", output, turn))


class BeforeToolCallProxy(ProxyCore):
    async def before_tool_call(self, call: ToolCall, turn: TurnContext) -> ToolDecision | None:
        return cast(ToolDecision | None, await forward(self, "before_tool_call", call, turn))


class AfterToolCallProxy(ProxyCore):
    async def after_tool_call(
        self, call: ToolCall, result: str, turn: TurnContext
    ) -> str | Annotated | None:
        answer = await forward(self, "after_tool_call", call, result, turn)
        return cast(str | Annotated | None, answer)


class ModelRoutingProxy(ProxyCore):
    async def route_model(self, messages: Messages, turn: TurnContext) -> ModelRoute | None:
        return cast(ModelRoute | None, await forward(self, "route_model", messages, turn))


class CompactionProxy(ProxyCore):
    async def on_compaction(self, items: Messages, turn: TurnContext) -> CompactionPlan | None:
        return cast(CompactionPlan | None, await forward(self, "on_compaction", items, turn))


class InputGuardrailProxy(ProxyCore):
    async def check_input(self, text: str, turn: TurnContext) -> GuardrailTrip | None:
        return cast(GuardrailTrip | None, await forward(self, "check_input", text, turn))


class OutputGuardrailProxy(ProxyCore):
    async def check_output(self, text: str, turn: TurnContext) -> GuardrailTrip | None:
        return cast(GuardrailTrip | None, await forward(self, "check_output", text, turn))


HOOK_MIXINS: dict[str, type[ProxyCore]] = {
    Capability.TURN_START: TurnStartProxy,
    Capability.TURN_END: TurnEndProxy,
    Capability.SESSION_START: SessionStartProxy,
    Capability.SESSION_END: SessionEndProxy,
    Capability.INPUT_MESSAGES: InputMessagesProxy,
    Capability.PLAIN_TEXT: PlainTextProxy,
    Capability.TAG: TagProxy,
    Capability.LLM_OUTPUT: LlmOutputProxy,
    Capability.BEFORE_TOOL_CALL: BeforeToolCallProxy,
    Capability.AFTER_TOOL_CALL: AfterToolCallProxy,
    Capability.MODEL_ROUTING: ModelRoutingProxy,
    Capability.COMPACTION: CompactionProxy,
    Capability.INPUT_GUARDRAIL: InputGuardrailProxy,
    Capability.OUTPUT_GUARDRAIL: OutputGuardrailProxy,
}
