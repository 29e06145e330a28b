"""What answers in place of the model and of some tools during a replay.

``ReplayedModel``, the SDK's ``ScriptedModel``, answers each model request of
the turn being replayed with the next recorded response (``get_response`` and
``stream_response`` alike: a recorded stream is played back event by event; a
recorded plain response is streamed as the SDK streams a scripted one). ``RecordedTools`` gives a
tool call its recorded result when the tool is side-effecting (what consent
says, ADR 0021) or one of the kernel's own tools (clock, extension list,
restart: they read the live system); every other tool runs. ``RunReplayState``
is a workflow run's: each step takes its own records (steps may run side by
side), found by the step's turn, which is served while it acts (ADR 0091).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import FunctionTool
from agents.items import ModelResponse, TResponseStreamEvent
from agents.testing import ModelCall, ModelStep, ScriptedModel
from agents.usage import Usage
from openai.types.responses import ResponseOutputItem, ResponseStreamEvent
from pydantic import TypeAdapter

from core.events.topics import RecordTopics
from core.extensions.access.state_scope import current_turn
from core.replay.errors import ReplayError
from core.replay.recording import NOT_STOOD_IN
from core.replay.trace import RecordedTurn

__all__ = ["RecordedTools", "ReplayState", "ReplayedModel", "RunReplayState"]

_OUTPUT = TypeAdapter(ResponseOutputItem)
_EVENT = TypeAdapter(ResponseStreamEvent)


class ReplayState:
    """The recorded turn being replayed and how far its records are used."""

    def __init__(self) -> None:
        self.turn: RecordedTurn | None = None
        self._models: list[dict[str, Any]] = []
        self._tools: list[dict[str, Any]] = []
        self.stood_in: set[str] = set()  # call ids answered from the record

    def begin(self, turn: RecordedTurn) -> None:
        self.turn = turn
        self._models = [f.payload for f in turn.frames if f.topic == RecordTopics.REPLAY_MODEL]
        self._tools = [f.payload for f in turn.frames if f.topic == RecordTopics.REPLAY_TOOL]

    def next_model(self) -> dict[str, Any]:
        while self._models:
            record = self._models.pop(0)
            if record.get("inside") is None or record["inside"] not in self.stood_in:
                return record
        where = f"turn {self.turn.turn_id}" if self.turn else "no turn"
        raise ReplayError(f"the model was asked more often than recorded ({where})")

    def tool_result(self, name: str, call_id: str | None) -> Any:
        """The recorded result of this call (by call id, else the next of that tool)."""
        match = next((t for t in self._tools if call_id and t.get("call_id") == call_id), None)
        if match is None:
            match = next((t for t in self._tools if t.get("tool") == name), None)
        if match is None:
            return f"error: replay has no recorded result for tool {name}"
        self._tools.remove(match)
        if call_id:
            self.stood_in.add(call_id)
        result = match.get("result")
        if isinstance(result, dict) and "$model" in result:
            return result.get("value")
        return result


class RunReplayState(ReplayState):
    """A workflow run's records: the step asking (the turn served) takes the next of
    its own model and tool records."""

    def __init__(self, steps: list[RecordedTurn]) -> None:
        super().__init__()
        self._steps = {step.turn_id: step for step in steps}
        self._models_of: dict[str, list[dict[str, Any]]] = {}
        self._tools_of: dict[str, list[dict[str, Any]]] = {}
        for step in steps:
            self.begin(step)
            self._models_of[step.turn_id], self._tools_of[step.turn_id] = self._models, self._tools

    def _asking(self) -> None:
        """The records of the step being served become the ones taken from."""
        turn = current_turn()
        key = turn.turn_id if turn is not None and turn.turn_id else ""
        self.turn = self._steps.get(key)
        self._models = self._models_of.setdefault(key, [])
        self._tools = self._tools_of.setdefault(key, [])

    def next_model(self) -> dict[str, Any]:
        self._asking()
        return super().next_model()

    def tool_result(self, name: str, call_id: str | None) -> Any:
        self._asking()
        return super().tool_result(name, call_id)


class RecordedTools:
    """``ToolStandIn`` of a replay: recorded results for tools that must not run."""

    def __init__(self, state: ReplayState, must_not_run: Callable[[FunctionTool], bool]) -> None:
        self._state = state
        self._must_not_run = must_not_run

    async def result_for(self, tool: FunctionTool, call_id: str | None, raw: str) -> Any:
        if not self._must_not_run(tool):
            return NOT_STOOD_IN
        return self._state.tool_result(tool.name, call_id)


class ReplayedModel(ScriptedModel):
    """The SDK's ``ScriptedModel`` playing the recording of the turn being replayed.

    Each model call is one scripted step whose answer is taken when the call is
    made: the next recorded response, skipping those recorded inside a tool call
    that was stood in (known only by then). ``ScriptedModel`` turns it into the
    ``ModelResponse`` or, for a streamed call, plays the recorded events back (a
    response recorded unstreamed is streamed as the SDK streams a scripted one);
    a recorded failure is raised again, as it happened.
    """

    def __init__(self, state: ReplayState) -> None:
        super().__init__()
        self._state = state

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.enqueue(ModelStep.respond(self._recorded))
        return await super().get_response(*args, **kwargs)

    async def stream_response(
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        self.enqueue(ModelStep.respond(self._recorded))
        async for event in super().stream_response(*args, **kwargs):
            yield event

    def _recorded(self, call: ModelCall) -> ModelStep:
        response = _answer(self._state.next_model())
        output = [_OUTPUT.validate_python(item) for item in response.get("output", [])]
        usage = response.get("usage") or {}
        used = Usage(
            requests=1,
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            total_tokens=int(usage.get("total_tokens", 0)),
        )
        response_id = response.get("response_id")
        events = response.get("events")
        if call.streamed and isinstance(events, list):
            played = [_EVENT.validate_python(event) for event in events]
            return ModelStep.stream(played, output=output, usage=used, response_id=response_id)
        return ModelStep(output=output, usage=used, response_id=response_id)


def _answer(record: dict[str, Any]) -> dict[str, Any]:
    """The recorded response; a recorded failure is raised again, as it happened."""
    if "error" in record:
        raise ReplayError(f"recorded model failure: {record['error']}")
    response = record.get("response")
    if not isinstance(response, dict):
        raise ReplayError(f"a replay.model record without a response: {json.dumps(record)[:200]}")
    return response
