"""The model wrapper of replay recording: each model call of a recorded turn, told
to the recorder once it is done (ADR 0033, 0052).

``RecordingModel`` wraps every model the kernel hands out while ``replay.record``
is on; a call made while a recorded turn is served (a conversation's turn, or a
workflow run's step: a turn with a session) is told to the recorder with what it
was given and what came back (for a stream, its events). ``INSIDE_TOOL`` names
the tool call a model call happened in (an agent used as a tool). Apart from the
recorder (``core/replay/recording.py``) so each module has one job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from agents import Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from openai.types.responses.response_prompt_param import ResponsePromptParam

from core.agents.observer import ModelCall
from core.extensions.access.state_scope import current_turn
from core.extensions.contract import TurnContext

__all__ = ["INSIDE_TOOL", "ModelCalls", "RecordingModel", "recorded_turn"]

INSIDE_TOOL: ContextVar[str | None] = ContextVar("hearth_replay_inside_tool", default=None)


class ModelCalls(Protocol):
    """Who is told each recorded model call (the replay recorder)."""

    def model_called(self, turn: TurnContext, call: ModelCall) -> None: ...


class RecordingModel(Model):
    """A ``Model`` that records each request and its response (streamed ones too)."""

    def __init__(self, inner: Model, recorder: ModelCalls) -> None:
        self.inner = inner
        self._recorder = recorder

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        recording = recorded_turn() is not None
        call = _Call(system_instructions, input, tools, handoffs)
        try:
            response = await self.inner.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
        except Exception as exc:
            if recording:
                await self._record(call, streamed=False, error=exc)
            raise
        if recording:
            await self._record(
                call,
                streamed=False,
                output=response.output,
                usage=response.usage,
                response_id=response.response_id,
            )
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        stream = self.inner.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        if recorded_turn() is None:
            async for event in stream:
                yield event
            return
        call = _Call(system_instructions, input, tools, handoffs)
        events: list[Any] = []
        try:
            async for event in stream:
                events.append(event)
                yield event
        except Exception as exc:
            await self._record(call, streamed=True, error=exc)
            raise
        completed = next(
            (e for e in reversed(events) if getattr(e, "type", "") == "response.completed"), None
        )
        response = getattr(completed, "response", None)
        await self._record(
            call,
            streamed=True,
            output=list(getattr(response, "output", None) or []),
            usage=getattr(response, "usage", None),
            events=events,
        )

    async def close(self) -> None:
        await self.inner.close()

    async def _record(
        self,
        call: _Call,
        *,
        streamed: bool,
        output: list[Any] | None = None,
        usage: Any = None,
        response_id: str | None = None,
        events: list[Any] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """The call, told to the recorder (kept with its turn until the turn ends)."""
        turn = recorded_turn()
        if turn is None:
            return
        done = ModelCall(
            call.instructions,
            call.input if isinstance(call.input, str) else list(call.input),
            [str(getattr(t, "name", type(t).__name__)) for t in call.tools],
            [str(getattr(h, "tool_name", "")) for h in call.handoffs],
            streamed,
            INSIDE_TOOL.get(),
            output=list(output or []),
            usage=usage,
            response_id=response_id,
            events=events,
            error=None if error is None else f"{type(error).__name__}: {error}"[:500],
        )
        self._recorder.model_called(turn, done)


@dataclass(frozen=True, slots=True)
class _Call:
    """What one model request was given (what a record shows of it)."""

    instructions: str | None
    input: str | list[TResponseInputItem]
    tools: list[Tool]
    handoffs: list[Handoff]


def recorded_turn() -> TurnContext | None:
    """The turn being served, if it has a session (a conversation's turn, a workflow
    step); a stateless run has none and is not recorded."""
    turn = current_turn()
    return turn if turn is not None and turn.turn_id and turn.session_id else None
