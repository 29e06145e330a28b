"""Recording a conversation for replay: the user's text, every model exchange
and every tool call of a turn, journaled once after the turn (ADR 0033, 0052).

The recorder is a ``TurnObserver``: while the turn runs it only keeps what its
model wrapper (``RecordingModel``) and its tool tap saw; when the turn ends
(or pauses for an approval) it journals one event, published by the kernel
(source ``kernel``) with the turn id as correlation id, like a hook frame:

- ``replay.turn`` ``{turn_id, session_id, channel_id, user_id, sender_id, text,
  calls}``: the turn, the text as the user sent it;
- ``replay.calls`` ``{turn_id, session_id, calls}``: what a paused turn did after
  it was resumed.

Each of ``calls``, in the order they finished, is ``{"topic": "replay.model",
inside, streamed, request, response | error}`` — one model call: request
(instructions, input items, tool names; ``history``: how many items of the
conversation's history the input starts with, not stored again), response
(output items, usage) or, streamed, the stream's events — or ``{"topic":
"replay.tool", inside, tool, call_id, arguments, result, stood_in}``: one
tool call as the tool saw it (after the ``before_tool_call`` hooks) and its
own result (before ``after_tool_call``). ``core/replay/trace.py`` reads them
as the frames ``replay.model`` / ``replay.tool`` that recordings made before
ADR 0052 journaled one by one.

A workflow run (ADR 0091) is recorded as its own session, ``workflow:RUN``:
``replay.run`` when it starts (its definition, input, person and channel), and
one ``replay.step`` per step outcome, with the calls the step made (an agent
step's model calls, a tool step's tool call), correlated by the step's turn id.

``inside`` is the call id of the tool call a record happened in (an agent
used as a tool calls its own model), else ``None``. Payloads go through
``PayloadStore``: redacted once per turn, large ones stored once and
referenced. Only what happens inside a conversation's turn or a workflow step
is recorded (``serving`` a turn with a session): a stateless agent run has no
conversation to replay. The model wrapper is ``recording_model.RecordingModel``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agents import FunctionTool
from agents.models.interface import Model
from agents.tool_context import ToolContext

from core.agents.observer import ModelCall, ToolCall
from core.events.topics import RecordTopics
from core.extensions.contract import TurnContext, TurnOutcome
from core.replay.payloads import DEFAULT_MAX_BYTES, Blob, PayloadStore
from core.replay.recording_model import INSIDE_TOOL, RecordingModel, recorded_turn

if TYPE_CHECKING:
    from core.config import Settings
    from core.kernel.hooks.frames import FrameSink

__all__ = ["NOT_STOOD_IN", "ReplayRecorder", "ToolStandIn"]

log = logging.getLogger("core.replay")

SOURCE = "kernel"

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]
OPEN_TURNS = 1024  # turns collected at once; beyond, the oldest (never ended) is dropped


class ToolStandIn(Protocol):
    """Gives a tool call its recorded result in a replay; ``NOT_STOOD_IN``: run the tool."""

    async def result_for(self, tool: FunctionTool, call_id: str | None, raw: str) -> Any: ...


NOT_STOOD_IN = object()  # what ``ToolStandIn.result_for`` returns to let the tool run


class ReplayRecorder:
    """Collects each turn's model and tool calls in memory (a ``TurnObserver``) and
    journals the turn once, after it; a record that fails is logged, never fatal."""

    def __init__(
        self, sink: FrameSink, *, enabled: bool = True, max_payload_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self._sink = sink
        self.enabled = enabled
        self.payloads = PayloadStore(sink, max_bytes=max_payload_bytes)
        self.stand_in: ToolStandIn | None = None  # a replay answers some tools from the record
        self._turns: dict[str, _TurnCalls] = {}

    @classmethod
    def from_settings(cls, sink: FrameSink, settings: Settings) -> ReplayRecorder:
        """``replay.record`` says whether to record; ``events.max_payload_bytes`` bounds blobs."""
        return cls(
            sink,
            enabled=settings.replay.record,
            max_payload_bytes=settings.events.max_payload_bytes,
        )

    # ------------------------------------------------------------ TurnObserver

    def turn_started(self, turn: TurnContext, text: str) -> None:
        if self.enabled and turn.turn_id:
            head = {
                "channel_id": turn.channel_id,
                "user_id": turn.user_id,
                "sender_id": turn.sender_id,
                "text": text,
            }
            self._turns[turn.turn_id] = _TurnCalls(head)
            while len(self._turns) > OPEN_TURNS:  # turns that never ended (cancelled tasks)
                del self._turns[next(iter(self._turns))]

    def history_given(self, turn: TurnContext, history: Sequence[Any]) -> None:
        calls = self._calls(turn)
        if calls is not None:
            calls.history = history

    def model_called(self, turn: TurnContext, call: ModelCall) -> None:
        calls = self._calls(turn)
        if calls is not None:
            calls.calls.append((call, calls.history))

    def tool_called(self, turn: TurnContext, call: ToolCall) -> None:
        calls = self._calls(turn)
        if calls is not None:
            calls.calls.append((call, ()))

    async def turn_paused(self, turn: TurnContext) -> None:
        await self._journal(turn)

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        await self._journal(turn)

    async def _journal(self, turn: TurnContext) -> None:
        """The turn's one record (``replay.turn``; ``replay.calls`` for the part of a
        paused turn after its resumption), its payloads redacted once, with its new
        blobs in one group commit."""
        calls = self._turns.pop(turn.turn_id, None) if turn.turn_id else None
        if calls is None:
            return
        head = calls.head or {}
        (said,), records, pending = self._staged(calls, [head.get("text")])
        payload: dict[str, Any] = _ids(turn)
        if calls.head is not None:
            payload.update({**calls.head, "text": said})
        payload["calls"] = records
        topic = RecordTopics.REPLAY_TURN if calls.head is not None else RecordTopics.REPLAY_CALLS
        record = self._publish(topic, turn.turn_id, payload)
        await self.payloads.publish_with(pending, record)

    def _staged(
        self, calls: _TurnCalls, values: list[Any]
    ) -> tuple[list[Any], list[dict[str, Any]], list[Blob]]:
        """``values`` and the records of ``calls``, redacted in one pass and staged:
        (``values`` as stored, the call records, the blobs to journal with them)."""
        builds: list[Build] = []
        taken: list[Any] = []
        for call, history in calls.calls:  # one list of values: redacted in one pass
            build, values_of_call = (
                _tool_record(call) if isinstance(call, ToolCall) else _model_record(call, history)
            )
            builds.append(build)
            taken += values_of_call
        staged, pending = self.payloads.stage_all([*values, *taken])
        mine, parts = staged[: len(values)], staged[len(values) :]
        records = []
        for build in builds:  # each takes its parts, in order (a loop: on every turn's path)
            records.append(build(parts))
        return mine, records, pending

    # ------------------------------------------------------------ workflow runs

    async def run_started(self, session_id: str, head: dict[str, Any]) -> None:
        """A workflow run starts (ADR 0091): ``replay.run`` (correlation id
        ``session_id``, ``workflow:RUN``) holds what a replay starts it again from —
        ``definition`` and ``input`` staged like any payload, the rest inline."""
        if not self.enabled:
            return
        (definition, given), pending = self.payloads.stage_all(
            [head.get("definition"), head.get("input")]
        )
        payload = {**head, "session_id": session_id, "definition": definition, "input": given}
        record = self._publish(RecordTopics.REPLAY_RUN, session_id, payload)
        await self.payloads.publish_with(pending, record)

    def step_started(self, turn: TurnContext) -> None:
        """A workflow step acts as ``turn`` (its model and tool calls are collected)."""
        if self.enabled and turn.turn_id and turn.session_id:
            self._turns[turn.turn_id] = _TurnCalls(None)
            while len(self._turns) > OPEN_TURNS:  # steps that never ended (cancelled runs)
                del self._turns[next(iter(self._turns))]

    async def step_ended(self, turn: TurnContext, step: dict[str, Any]) -> None:
        """A step's outcome (``replay.step``, correlation id the step's turn id):
        ``step`` (id, action, input, status, result, error, started_at) and the calls
        it made, journaled once like a turn's."""
        if not self.enabled or not turn.turn_id:
            return
        calls = self._turns.pop(turn.turn_id, None) or _TurnCalls(None)
        (given, result), records, pending = self._staged(
            calls, [step.get("input"), step.get("result")]
        )
        payload = {**_ids(turn), **step, "input": given, "result": result, "calls": records}
        record = self._publish(RecordTopics.REPLAY_STEP, turn.turn_id, payload)
        await self.payloads.publish_with(pending, record)

    def _calls(self, turn: TurnContext) -> _TurnCalls | None:
        """The calls collected for ``turn`` (a resumed turn starts collecting anew)."""
        if not self.enabled or not turn.turn_id or not turn.session_id:
            return None
        calls = self._turns.get(turn.turn_id)
        if calls is None:
            calls = self._turns[turn.turn_id] = _TurnCalls(None)
        return calls

    # ------------------------------------------------------------ models

    def wrap_model(self, model: Model) -> Model:
        """``model`` whose calls are recorded (``model`` itself while recording is off)."""
        if not self.enabled or isinstance(model, RecordingModel):
            return model
        return RecordingModel(model, self)

    # ------------------------------------------------------------ tools

    def tap(self, tool: FunctionTool, invoke: Invoker) -> Invoker:
        """``invoke`` recorded (and, in a replay, perhaps answered from the record)."""

        async def tapped(ctx: ToolContext[Any], raw: str) -> Any:
            turn = recorded_turn() if self.enabled else None
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
                call = ToolCall(tool.name, call_id, raw, result, stood_in, INSIDE_TOOL.get())
                self.tool_called(turn, call)
            return result

        return tapped

    async def _publish(self, topic: str, correlation: str | None, payload: dict[str, Any]) -> None:
        try:
            await self._sink.publish(topic, SOURCE, payload, correlation_id=correlation)
        except Exception as exc:  # the turn (or step) goes on; only its record is missing
            log.error("%s of %s not journaled: %s", topic, correlation, exc)


@dataclass(slots=True)
class _TurnCalls:
    """What one turn did so far: its start (``None``: a resumed turn) and its calls,
    each model call with the history its run was given then."""

    head: dict[str, Any] | None
    history: Sequence[Any] = ()
    calls: list[tuple[ModelCall | ToolCall, Sequence[Any]]] = field(default_factory=list)


# a call's record: the values to redact and store, and how to build the record from them
Build = Callable[[list[Any]], dict[str, Any]]


def _tool_record(call: ToolCall) -> tuple[Build, list[Any]]:
    """What a tool call stores; ``build`` takes its staged values back from the
    turn's staged list, in order (the list is consumed)."""

    def build(parts: list[Any]) -> dict[str, Any]:
        (arguments, result), parts[:2] = parts[:2], []
        return {
            "topic": RecordTopics.REPLAY_TOOL,
            "inside": call.inside,
            "tool": call.tool,
            "call_id": call.call_id,
            "arguments": arguments,
            "result": result,
            "stood_in": call.stood_in,
        }

    return build, [call.arguments, _jsonable(call.result)]


def _model_record(call: ModelCall, history: Sequence[Any]) -> tuple[Build, list[Any]]:
    """A model call's request and response. The run's history items are not stored
    again: ``history`` counts those its input starts with (the earlier turns' records
    hold them), ``input`` is what follows."""
    items = [call.input] if isinstance(call.input, str) else list(call.input)
    listed = not isinstance(call.input, str) and call.inside is None
    given = _history_prefix(items, history) if listed else 0
    items = items[given:]
    dumps = [item.model_dump(mode="json", exclude_unset=True) for item in call.output]
    stream = [e.model_dump(mode="json", exclude_unset=True) for e in call.events or []]
    values = [call.instructions, *items, *dumps, stream]

    def build(parts: list[Any]) -> dict[str, Any]:
        taken = parts[: len(values)]
        del parts[: len(values)]
        n = len(items)
        request: dict[str, Any] = {
            "instructions": taken[0],
            "input": taken[1] if isinstance(call.input, str) else taken[1 : 1 + n],
            "tools": call.tools,
            "handoffs": call.handoffs,
        }
        if given:
            request["history"] = given
        record: dict[str, Any] = {
            "topic": RecordTopics.REPLAY_MODEL,
            "inside": call.inside,
            "streamed": call.streamed,
            "request": request,
        }
        if call.error is not None:
            record["error"] = call.error
            return record
        response: dict[str, Any] = {
            "output": taken[1 + n : 1 + n + len(dumps)],
            "usage": _usage(call.usage),
            "response_id": call.response_id,
        }
        if call.events is not None:
            response["events"] = taken[-1]
        record["response"] = response
        return record

    return build, values


def _history_prefix(items: list[Any], history: Sequence[Any]) -> int:
    """How many of ``items`` are the history, in order (0 unless all of it is there)."""
    n = len(history)
    if not n or len(items) < n:
        return 0
    for given, item in zip(history, items, strict=False):
        if given is not item and given != item:
            return 0
    return n


def _ids(turn: TurnContext) -> dict[str, Any]:
    return {"turn_id": turn.turn_id, "session_id": turn.session_id}


def _usage(usage: Any) -> dict[str, int]:
    """The response's token counts as stored (0 where the provider gave none)."""
    return {
        "input_tokens": int(getattr(usage, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "output_tokens", 0) or 0),
        "total_tokens": int(getattr(usage, "total_tokens", 0) or 0),
    }


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
