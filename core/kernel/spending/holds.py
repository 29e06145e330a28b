"""Turns in flight hold what they will probably cost (ADR 0075).

A turn's usage is recorded when it is committed (ADR 0061), so the budget
read before a turn does not see the turns still running: eight requests at
once all passed a budget that covered three. Each admitted turn therefore
holds an estimate of its cost (``Holds``) until it ends — answered, failed,
cancelled or paused — and the budget admits a turn only while what is spent,
what is held and its own estimate fit in the limit.

The estimate (``TurnEstimate``) is the median cost of the recent turns of
this household: a turn's cost is mostly its history and instructions, which
the new message alone does not show, and a median is not thrown by one long
turn. Before any turn is known it is the prompt's size plus a context and an
answer of typical length, at the default model's price.

Holds are kept in memory only: a kernel that crashes holds nothing after its
restart, and a turn that never ends cannot keep a budget spent.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Mapping

from core.config import ModelPrice
from core.kernel.spending.report import price_of, summarise
from core.kernel.spending.store import UsageBook, UsageEntry

__all__ = ["Holds", "TurnEstimate"]

RECENT_TURNS = 20  # the median of this many recent turns' costs
KNOWN_FOR_S = 7 * 86400.0  # the recorded turns read once, at the first estimate
COLD_CONTEXT_TOKENS = 2_000  # instructions and history, before any turn is known
COLD_ANSWER_TOKENS = 1_000
CHARS_PER_TOKEN = 4


class Holds:
    """The estimates held by the turns in flight, by turn and person."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str | None, float]] = {}

    def total(self, person: str | None) -> float:
        """What ``person``'s turns hold (everyone's for ``None``: the household)."""
        return sum(
            amount for whose, amount in self._held.values() if person is None or whose == person
        )

    def hold(self, turn_id: str, person: str | None, amount: float) -> None:
        self._held[turn_id] = (person, amount)

    def release(self, turn_id: str | None) -> None:
        self._held.pop(turn_id or "", None)

    def __len__(self) -> int:
        return len(self._held)


class TurnEstimate:
    """What the next turn will probably cost; see the module's docstring."""

    def __init__(
        self, prices: Mapping[str, ModelPrice], book: UsageBook, default_model: str | None
    ) -> None:
        self.prices = prices
        self.book = book
        self.default_model = default_model
        self._recent: deque[float] = deque(maxlen=RECENT_TURNS)
        self._read = False

    async def cost(self, text: str) -> float:
        if not self._read:
            self._read = True
            for cost in await self._recorded():
                self._recent.append(cost)
        if self._recent:
            return statistics.median(self._recent)
        price = price_of(self.prices, self.default_model) if self.default_model else None
        if price is None:
            return 0.0
        prompt = COLD_CONTEXT_TOKENS + len(text) // CHARS_PER_TOKEN
        return price.cost(prompt, 0, COLD_ANSWER_TOKENS)

    def learn(self, entries: list[UsageEntry]) -> None:
        """A turn ended with these tokens (one entry per model that served it)."""
        if entries:
            self._recent.append(summarise(entries, self.prices).cost)

    async def _recorded(self) -> list[float]:
        """The costs of the latest recorded turns (a turn's rows share their time)."""
        turns: dict[tuple[str, float], list[UsageEntry]] = {}
        for entry in await self.book.entries(time.time() - KNOWN_FOR_S):
            turns.setdefault((entry.session_id, entry.created_at), []).append(entry)
        costs = [summarise(rows, self.prices).cost for rows in turns.values()]
        return costs[-RECENT_TURNS:]
