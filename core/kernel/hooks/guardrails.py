"""Extensions' guardrails as the SDK's input and output guardrails (seed 004, ADR 0021).

``InputGuardrailHook.check_input(text, turn)`` sees the user's newest message
before the orchestrator's model answers it; ``OutputGuardrailHook.
check_output(text, turn)`` sees the final answer before the user does. Both
run in priority order under the hook deadline with the hook containment (a
failing or late guardrail is skipped); the first ``GuardrailTrip`` trips the
SDK's tripwire, is journaled as a ``hook.guardrail`` frame, and ends the turn
with the trip's message — plain words, never a stack trace
(``guardrail_reply``). Input guardrails run before the model starts
(``run_in_parallel=False``): a blocked message costs no model call and runs
no tool. With no guardrail wired the orchestrator gets none: no cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    OutputGuardrail,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
)

from core.extensions.contract import (
    GuardrailTrip,
    InputGuardrailHook,
    OutputGuardrailHook,
    TurnContext,
)
from core.extensions.loading.capabilities import Capability, hook_capability
from core.kernel.hooks.calls import SKIPPED, HookCaller, kind_of
from core.kernel.hooks.frames import FrameRecorder
from core.kernel.hooks.registry import HookRegistry

__all__ = ["INPUT_REFUSAL", "OUTPUT_REFUSAL", "Tripped", "TurnGuardrails", "guardrail_reply"]

INPUT: Final = hook_capability(InputGuardrailHook)
OUTPUT: Final = hook_capability(OutputGuardrailHook)
INPUT_REFUSAL = "Sorry, I can't help with that request."
OUTPUT_REFUSAL = "Sorry, I can't share that answer."


@dataclass(frozen=True, slots=True)
class Tripped:
    """Which extension's guardrail tripped, and its verdict (the tripwire's info)."""

    owner: str
    trip: GuardrailTrip


class TurnGuardrails:
    """Builds the orchestrator's guardrails from the wired extensions."""

    def __init__(self, registry: HookRegistry, caller: HookCaller, frames: FrameRecorder) -> None:
        self._registry = registry
        self._caller = caller
        self._frames = frames

    def input_guardrails(self) -> list[InputGuardrail[Any]]:
        if not self._registry.at(INPUT):
            return []
        return [InputGuardrail(self._check_input, name="extensions", run_in_parallel=False)]

    def output_guardrails(self) -> list[OutputGuardrail[Any]]:
        if not self._registry.at(OUTPUT):
            return []
        return [OutputGuardrail(self._check_output, name="extensions")]

    async def _check_input(
        self, ctx: RunContextWrapper[Any], agent: Agent[Any], given: Any
    ) -> GuardrailFunctionOutput:
        return await self._check("check_input", INPUT, _newest_user_text(given), ctx)

    async def _check_output(
        self, ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        return await self._check("check_output", OUTPUT, str(output or ""), ctx)

    async def _check(
        self, hook: str, point: Capability, text: str, ctx: RunContextWrapper[Any]
    ) -> GuardrailFunctionOutput:
        context = getattr(ctx, "context", None)
        turn = context if isinstance(context, TurnContext) else TurnContext()
        for entry in self._registry.at(point):
            pending = getattr(entry.target, hook)(text, turn)
            result = await self._caller.call(entry, hook, turn, pending)
            if result is SKIPPED or result is None:
                continue
            if not isinstance(result, GuardrailTrip):
                self._caller.refuse(entry, hook, turn, kind_of(result))
                continue
            await self._frames.record(
                "guardrail",
                entry.owner,
                hook,
                turn,
                before=text,
                reason=result.reason,
                message=result.message,
            )
            return GuardrailFunctionOutput(Tripped(entry.owner, result), tripwire_triggered=True)
        return GuardrailFunctionOutput(None, tripwire_triggered=False)


def guardrail_reply(
    exc: InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered,
) -> str:
    """What the user reads when a guardrail stopped the turn."""
    info = exc.guardrail_result.output.output_info
    message = info.trip.message.strip() if isinstance(info, Tripped) else ""
    if message:
        return message
    return INPUT_REFUSAL if isinstance(exc, InputGuardrailTripwireTriggered) else OUTPUT_REFUSAL


def _newest_user_text(given: Any) -> str:
    """The newest user message in the run's input (the whole history is given)."""
    if isinstance(given, str):
        return given
    for item in reversed(list(given or ())):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            parts = [p.get("text", "") for p in content or () if isinstance(p, dict)]
            return "".join(str(part) for part in parts)
    return ""
