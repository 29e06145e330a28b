"""The budget: what the model may cost a day and a month (``models.budget``).

Spent is what ``/usage`` shows: the recorded usage of the period (the
user's day and month, ``settings.timezone``) times ``models.prices``. With
``scope: household`` everyone's turns count against one limit; with
``scope: person`` each person's against their own. Before a turn, a limit
that cannot take it — what is spent, what the turns in flight hold and this
turn's estimate (``holds``, ADR 0075) — refuses it with a line that says
which limit, how much, and until when; an admitted turn holds its estimate
until it ends (``release``). Commands and reminders never ask. After a turn, crossing
``notify_at`` (80 %) of a limit tells the owner, once per period and limit
(the mark is stored: a restart or a second kernel process does not tell
again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from core.config import BudgetSettings, ModelPrice
from core.extensions.contract import TurnContext
from core.kernel.spending.holds import Holds, TurnEstimate
from core.kernel.spending.report import Periods, summarise
from core.kernel.spending.store import UsageBook, UsageEntry

__all__ = ["Budget", "BudgetState"]


@dataclass(frozen=True, slots=True)
class BudgetState:
    """One limit's standing: its name (``daily``/``monthly``), limit, spent, period."""

    name: str
    limit: float
    spent: float
    period: str

    @property
    def share(self) -> float:
        return self.spent / self.limit


class Budget:
    """Checks turns against ``models.budget``; see the module's docstring."""

    def __init__(
        self,
        settings: BudgetSettings,
        prices: Mapping[str, ModelPrice],
        book: UsageBook,
        now: Callable[[], datetime],
        default_model: str | None = None,
    ) -> None:
        self.settings = settings
        self.prices = prices
        self.book = book
        self.now = now
        self.holds = Holds()
        self.estimate = TurnEstimate(prices, book, default_model)
        # admissions one at a time: each reads what the one before it holds
        self._admitting = asyncio.Lock()

    def _person(self, turn: TurnContext) -> str | None:
        return (turn.person or "owner") if self.settings.scope == "person" else None

    async def states(self, turn: TurnContext) -> list[BudgetState]:
        """The standing of each limit set, for ``turn``'s person or the household."""
        periods = Periods.at(self.now())
        person = self._person(turn)
        states = []
        for name, limit, since, period in (
            ("daily", self.settings.daily, periods.day_start, periods.day),
            ("monthly", self.settings.monthly, periods.month_start, periods.month),
        ):
            if limit is None:
                continue
            spent = summarise(await self.book.totals(since, person=person), self.prices).cost
            states.append(BudgetState(name, limit, spent, period))
        return states

    async def admit(self, turn: TurnContext, text: str = "") -> str | None:
        """The line that refuses a new turn, or ``None`` once it holds its estimate
        (until ``release``): admitted only while spent + held + estimate fit."""
        if not self.settings.limited:
            return None
        async with self._admitting:
            estimate = await self.estimate.cost(text)
            person = self._person(turn)
            held = self.holds.total(person)
            for state in await self.states(turn):
                if state.spent + held + estimate > state.limit or state.spent >= state.limit:
                    return self._refusal(state, held, estimate)
            if turn.turn_id is not None:
                self.holds.hold(turn.turn_id, person, estimate)
        return None

    async def release(self, turn: TurnContext) -> None:
        """``turn`` ended (committed, failed, cancelled or paused): its hold goes."""
        if self.settings.limited:
            async with self._admitting:
                self.holds.release(turn.turn_id)

    def learn(self, entries: list[UsageEntry]) -> None:
        """A turn's recorded tokens, for the next turns' estimate."""
        if self.settings.limited:
            self.estimate.learn(entries)

    def _refusal(self, state: BudgetState, held: float, estimate: float) -> str:
        whose = "your" if self.settings.scope == "person" else "the household's"
        until = "tomorrow" if state.name == "daily" else "next month"
        standing = f"{self._money(state.spent + held)} of {self._money(state.limit)}"
        if held:
            standing += f", {self._money(held)} of it held by answers in progress"
        state_of = "is spent"
        if state.spent + held < state.limit:
            state_of = "has too little left for another answer"
            standing += f"; an answer costs about {self._money(estimate)}"
        if held and state.spent + estimate <= state.limit:
            until = f"when the answers in progress leave room, at the latest {until}"
        return (
            f"Sorry, {whose} {state.name} model budget {state_of} ({standing}). "
            f"I can answer again {until}, or when the owner raises "
            f"models.budget.{state.name}. Commands and reminders still work."
        )

    async def notice(self, turn: TurnContext) -> str | None:
        """The owner's notice when ``turn`` took a limit past ``notify_at``, the first
        time in its period; ``None`` otherwise."""
        if not self.settings.limited:
            return None
        for state in await self.states(turn):
            if state.share < self.settings.notify_at:
                continue
            person = self._person(turn)
            mark = f"{state.name}:{state.period}:{person or '*'}"
            if not await self.book.first_notice(mark):
                continue
            whose = f"{person}'s" if person else "The household's"
            return (
                f"{whose.capitalize() if not person else whose} {state.name} model budget "
                f"is {state.share:.0%} used: {self._money(state.spent)} of "
                f"{self._money(state.limit)} ({state.period}). At 100% new messages are "
                f"refused until the period ends or models.budget.{state.name} is raised."
            )
        return None

    def _money(self, amount: float) -> str:
        return f"{amount:.2f} {self.settings.currency}"
