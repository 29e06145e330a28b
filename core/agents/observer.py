"""Who watches a conversation's turn: one interface for replay recording and metrics.

The turn runner tells a ``TurnObserver`` that a turn started (the text as the
user sent it), how many history items its run was given, and that it ended
(or paused for an approval); the model and tool wrappers tell it each model
call and tool call once it is done, with what it was given and what came
back. Observers only collect during the turn and must be cheap: the replay
recorder keeps the calls in memory and journals the turn once, after it
(ADR 0052); metrics count the ended turn. ``TurnObservers`` tells several.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from core.extensions.contract import TurnContext, TurnOutcome

__all__ = [
    "NO_TURN_OBSERVER",
    "ModelCall",
    "QuietObserver",
    "ToolCall",
    "TurnObserver",
    "TurnObservers",
]


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call as it went: the request and the response (or the error).

    ``inside``: the call id of the tool call it happened in (an agent used as a
    tool calls its own model), else ``None``."""

    instructions: str | None
    input: str | list[Any]
    tools: list[str]
    handoffs: list[str]
    streamed: bool
    inside: str | None
    output: list[Any] = field(default_factory=list)
    usage: Any = None
    response_id: str | None = None
    events: list[Any] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call as the tool saw it (after the ``before_tool_call`` hooks) and
    its own result; ``stood_in``: a replay answered it from the record."""

    tool: str
    call_id: str | None
    arguments: str
    result: Any
    stood_in: bool
    inside: str | None


class TurnObserver(Protocol):
    """Told what a turn does; collects, never raises, never slows the turn down."""

    def turn_started(self, turn: TurnContext, text: str) -> None:
        """A conversation's turn starts; ``text`` as the user sent it."""
        ...

    def history_given(self, turn: TurnContext, history: Sequence[Any]) -> None:
        """The history items the turn's run is given before the new input."""
        ...

    def model_called(self, turn: TurnContext, call: ModelCall) -> None: ...

    def tool_called(self, turn: TurnContext, call: ToolCall) -> None: ...

    async def turn_paused(self, turn: TurnContext) -> None:
        """The turn stopped for the user's approval; what its resumption does is
        observed as the same turn, up to ``turn_ended``."""
        ...

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        """The turn is over, and how it went."""
        ...


class QuietObserver:
    """A ``TurnObserver`` that ignores everything: a base for observers that watch
    only some events (``TurnObservers`` does not call what they leave alone)."""

    def turn_started(self, turn: TurnContext, text: str) -> None:
        return None

    def history_given(self, turn: TurnContext, history: Sequence[Any]) -> None:
        return None

    def model_called(self, turn: TurnContext, call: ModelCall) -> None:
        return None

    def tool_called(self, turn: TurnContext, call: ToolCall) -> None:
        return None

    async def turn_paused(self, turn: TurnContext) -> None:
        return None

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        return None


class TurnObservers:
    """Several observers told in order (the kernel's: the replay recorder, metrics);
    an event goes only to those that watch it (not ``QuietObserver``'s no-op).
    ``started``, ``history`` and ``ended`` are those watching, chosen once: a caller
    on the turn's path (the turn runner) loops over them itself, so an event nobody
    watches costs no call."""

    def __init__(self, observers: Sequence[TurnObserver]) -> None:
        def watching(name: str) -> list[Any]:
            quiet = getattr(QuietObserver, name)
            return [getattr(o, name) for o in observers if getattr(type(o), name) is not quiet]

        self.started = watching("turn_started")
        self.history = watching("history_given")
        self._models = watching("model_called")
        self._tools = watching("tool_called")
        self._paused = watching("turn_paused")
        self.ended = watching("turn_ended")

    @classmethod
    def of(cls, observer: TurnObserver) -> TurnObservers:
        """``observer`` as a ``TurnObservers`` (itself when it is one)."""
        return observer if isinstance(observer, TurnObservers) else cls((observer,))

    def turn_started(self, turn: TurnContext, text: str) -> None:
        for started in self.started:
            started(turn, text)

    def history_given(self, turn: TurnContext, history: Sequence[Any]) -> None:
        for given in self.history:
            given(turn, history)

    def model_called(self, turn: TurnContext, call: ModelCall) -> None:
        for called in self._models:
            called(turn, call)

    def tool_called(self, turn: TurnContext, call: ToolCall) -> None:
        for called in self._tools:
            called(turn, call)

    async def turn_paused(self, turn: TurnContext) -> None:
        for paused in self._paused:
            await paused(turn)

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        for ended in self.ended:
            await ended(turn, outcome)


NO_TURN_OBSERVER: TurnObserver = TurnObservers(())
