"""Recording a conversation for replay: the user's text, every model exchange
and every tool call of a turn, journaled beside the hook frames (ADR 0033).

Each record is an event published by the kernel (source ``kernel``) with the
turn id as correlation id, like a hook frame:

- ``replay.turn`` ``{turn_id, session_id, channel_id, user_id, sender_id,
  text}``: a turn starts (the text as the user sent it);
- ``replay.model`` ``{turn_id, session_id, inside, streamed, request,
  response | error}``: one model call — request (instructions, input items,
  tool names), response (output items, usage) or, streamed, the stream's
  events and the final output;
- ``replay.tool`` ``{turn_id, session_id, inside, tool, call_id, arguments,
  result, stood_in}``: one tool call as the tool saw it (after the
  ``before_tool_call`` hooks) and its own result (before ``after_tool_call``).

``inside`` is the call id of the tool call a record happened in (an agent
used as a tool calls its own model), else ``None``. Payloads go through
``PayloadStore`` (redacted, large ones stored once and referenced). Only
what happens inside a conversation's turn is recorded (``serving``): a
stateless agent run has no conversation to replay.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents import FunctionTool, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool_context import ToolContext
from openai.types.responses.response_prompt_param import ResponsePromptParam

from core.events.topics import RecordTopics
from core.extensions.contract import TurnContext
from core.extensions.state_scope import current_turn
from core.replay.payloads import DEFAULT_MAX_BYTES, Blob, PayloadStore

if TYPE_CHECKING:
    from core.config import Settings
    from core.kernel.hooks.frames import FrameSink

__all__ = [
    "INSIDE_TOOL",
    "NOT_STOOD_IN",
    "RecordingModel",
    "ReplayRecorder",
    "ToolStandIn",
]

log = logging.getLogger("core.replay")

SOURCE = "kernel"

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]
INSIDE_TOOL: ContextVar[str | None] = ContextVar("hearth_replay_inside_tool", default=None)


class ToolStandIn(Protocol):
    """Gives a tool call its recorded result in a replay; ``NOT_STOOD_IN``: run the tool."""

    async def result_for(self, tool: FunctionTool, call_id: str | None, raw: str) -> Any: ...


NOT_STOOD_IN = object()  # what ``ToolStandIn.result_for`` returns to let the tool run


class ReplayRecorder:
    """Publishes the records of every turn; a record that fails is logged, never fatal."""

    def __init__(
        self, sink: FrameSink, *, enabled: bool = True, max_payload_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._sink = sink
        self.enabled = enabled
        self.payloads = PayloadStore(sink, max_bytes=max_payload_bytes)
        self.stand_in: ToolStandIn | None = None  # a replay answers some tools from the record

    @classmethod
    def from_settings(cls, sink: FrameSink, settings: Settings) -> ReplayRecorder:
        """``replay.record`` says whether to record; ``events.max_payload_bytes`` bounds blobs."""
        return cls(
            sink,
            enabled=settings.replay.record,
            max_payload_bytes=settings.events.max_payload_bytes,
        )

    # ------------------------------------------------------------ turns

    async def turn_started(self, turn: TurnContext, text: str) -> None:
        if self.enabled and turn.turn_id:
            (said,), pending = self.payloads.stage(text)
            payload = {
                **_ids(turn),
                "channel_id": turn.channel_id,
                "user_id": turn.user_id,
                "sender_id": turn.sender_id,
                "text": said,
            }
            await self._publish(RecordTopics.REPLAY_TURN, turn, payload, pending)

    # ------------------------------------------------------------ models

    def wrap_model(self, model: Model) -> Model:
        """``model`` whose calls are recorded (``model`` itself while recording is off)."""
        if not self.enabled or isinstance(model, RecordingModel):
            return model
        return RecordingModel(model, self)

    async def model_call(
        self,
        request: dict[str, Any],
        answer: dict[str, Any],
        pending: list[Blob],
        *,
        streamed: bool,
    ) -> None:
        turn = _recorded_turn()
        if turn is None:
            return
        payload = {
            **_ids(turn),
            "inside": INSIDE_TOOL.get(),
            "streamed": streamed,
            "request": request,
            **answer,
        }
        await self._publish(RecordTopics.REPLAY_MODEL, turn, payload, pending)

    # ------------------------------------------------------------ tools

    def tap(self, tool: FunctionTool, invoke: Invoker) -> Invoker:
        """``invoke`` recorded (and, in a replay, perhaps answered from the record)."""

        async def tapped(ctx: ToolContext[Any], raw: str) -> Any:
            turn = _recorded_turn() if self.enabled else None
            if turn is None and self.stand_in is None:
                return await invoke(ctx, raw)
            call_id = getattr(ctx, "tool_call_id", None)
            result: Any = NOT_STOOD_IN
            if self.stand_in is not None:
                result = await self.stand_in.result_for(tool, call_id, raw)
            stood_in = result is not NOT_STOOD_IN
            if not stood_in:
                token = INSIDE_TOOL.set(call_id)
                try:
                    result = await invoke(ctx, raw)
                finally:
                    INSIDE_TOOL.reset(token)
            if turn is not None:
                await self._tool_call(turn, tool.name, call_id, raw, result, stood_in)
            return result

        return tapped

    async def _tool_call(
        self,
        turn: TurnContext,
        name: str,
        call_id: str | None,
        raw: str,
        result: Any,
        stood_in: bool,
    ) -> None:
        (arguments, stored), pending = self.payloads.stage(raw, _jsonable(result))
        payload = {
            **_ids(turn),
            "inside": INSIDE_TOOL.get(),
            "tool": name,
            "call_id": call_id,
            "arguments": arguments,
            "result": stored,
            "stood_in": stood_in,
        }
        await self._publish(RecordTopics.REPLAY_TOOL, turn, payload, pending)

    async def _publish(
        self, topic: str, turn: TurnContext, payload: dict[str, Any], pending: list[Blob]
    ) -> None:
        """The record and the new blobs it references, in one group commit."""
        await self.payloads.publish_with(pending, self._publish_record(topic, turn, payload))

    async def _publish_record(self, topic: str, turn: TurnContext, payload: dict[str, Any]) -> None:
        try:
            await self._sink.publish(topic, SOURCE, payload, correlation_id=turn.turn_id)
        except Exception as exc:  # the turn goes on; only its record is missing
            log.error("%s of turn %s not journaled: %s", topic, turn.turn_id, exc)


class RecordingModel(Model):
    """A ``Model`` that records each request and its response (streamed ones too)."""

    def __init__(self, inner: Model, recorder: ReplayRecorder) -> None:
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
        recording = _recorded_turn() is not None
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
        if _recorded_turn() is None:
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
        """One ``replay.model`` record; its payloads are stored at once (one commit)."""
        items = [call.input] if isinstance(call.input, str) else list(call.input)
        dumps = [item.model_dump(mode="json", exclude_unset=True) for item in output or []]
        stream = [[e.model_dump(mode="json", exclude_unset=True) for e in events or []]]
        refs, pending = self._recorder.payloads.stage(call.instructions, *items, *dumps, *stream)
        n = len(items)
        request = {
            "instructions": refs[0],
            "input": refs[1] if isinstance(call.input, str) else refs[1 : 1 + n],
            "tools": [str(getattr(t, "name", type(t).__name__)) for t in call.tools],
            "handoffs": [str(getattr(h, "tool_name", "")) for h in call.handoffs],
        }
        if error is not None:
            await self._recorder.model_call(request, _error(error), pending, streamed=streamed)
            return
        response: dict[str, Any] = {
            "output": refs[1 + n : 1 + n + len(dumps)],
            "usage": _usage(usage),
            "response_id": response_id,
        }
        if events is not None:
            response["events"] = refs[-1]
        answer = {"response": response}
        await self._recorder.model_call(request, answer, pending, streamed=streamed)


@dataclass(frozen=True, slots=True)
class _Call:
    """What one model request was given (what a record shows of it)."""

    instructions: str | None
    input: str | list[TResponseInputItem]
    tools: list[Tool]
    handoffs: list[Handoff]


def _recorded_turn() -> TurnContext | None:
    """The conversation turn being served, if any (stateless runs are not recorded)."""
    turn = current_turn()
    return turn if turn is not None and turn.turn_id and turn.session_id else None


def _ids(turn: TurnContext) -> dict[str, Any]:
    return {"turn_id": turn.turn_id, "session_id": turn.session_id}


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def _usage(usage: Any) -> dict[str, int]:
    names = ("input_tokens", "output_tokens", "total_tokens")
    return {name: int(getattr(usage, name, 0) or 0) for name in names}


def _jsonable(value: Any) -> Any:
    """A tool result as JSON: text as it is, output items dumped, anything else ``str``."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return {"$model": type(value).__name__, "value": dump(mode="json")}
    if isinstance(value, list | dict):
        return value
    return str(value)
