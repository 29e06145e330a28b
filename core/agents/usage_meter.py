"""Which model used how many tokens in which turn: the orchestrator's ``AgentHooks``.

``TurnResult.usage`` (``core.agents.usage``) is a turn's sum; a turn that
fell over from one model to another (``FallbackModel``) used two, priced
differently. So each model response is counted here, under the turn it
served (``TurnContext.turn_id``, the run's context) and the model that
served it (``SERVED_MODEL``, set by the chain right before): the kernel
takes a turn's tally when it commits the turn (the ledger's usage rows),
and every response is told to the observers at once (metrics).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from agents import Agent, AgentHooks, RunContextWrapper
from agents.items import ModelResponse

from core.agents.fallback import SERVED_MODEL
from core.agents.usage import TurnUsage

__all__ = ["UNKNOWN_MODEL", "UsageMeter", "UsageObserver"]

UNKNOWN_MODEL = "unknown"
MAX_OPEN_TALLIES = 4096  # turns counted but never taken (agent runs): the oldest are dropped

# (model label, the tokens of one response)
UsageObserver = Callable[[str, TurnUsage], None]


class UsageMeter(AgentHooks[Any]):
    """Counts each model response per turn and model; see the module's docstring."""

    def __init__(self) -> None:
        self._tallies: OrderedDict[str, dict[str, TurnUsage]] = OrderedDict()
        self.observers: list[UsageObserver] = []

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        usage = response.usage
        details = getattr(usage, "input_tokens_details", None)
        counted = TurnUsage(
            int(usage.input_tokens or 0),
            int(getattr(details, "cached_tokens", 0) or 0),
            int(usage.output_tokens or 0),
            int(usage.requests or 1),
        )
        model = SERVED_MODEL.get() or _model_name(agent)
        self.add(getattr(context.context, "turn_id", None), model, counted)

    def add(self, turn_id: str | None, model: str, counted: TurnUsage) -> None:
        """Count ``counted`` for ``model`` under ``turn_id`` (a model response, or
        what a post-processor reports it used, issue 46), telling the observers."""
        for observer in self.observers:
            observer(model, counted)
        if turn_id is None:
            return
        tally = self._tallies.setdefault(turn_id, {})
        self._tallies.move_to_end(turn_id)
        tally[model] = tally.get(model, TurnUsage()) + counted
        while len(self._tallies) > MAX_OPEN_TALLIES:
            self._tallies.popitem(last=False)

    def take(self, turn_id: str | None) -> dict[str, TurnUsage]:
        """The tokens each model used for ``turn_id`` so far, forgotten here."""
        return {} if turn_id is None else self._tallies.pop(turn_id, {})


def _model_name(agent: Agent[Any]) -> str:
    """A model not behind a chain: its id, or its class (a test's); a wrapper (the
    replay recorder's) is looked through."""
    model: Any = agent.model
    if isinstance(model, str):
        return model or UNKNOWN_MODEL
    while getattr(model, "inner", None) is not None:
        model = model.inner
    named = getattr(model, "model", None)
    return named if isinstance(named, str) and named else type(model).__name__
