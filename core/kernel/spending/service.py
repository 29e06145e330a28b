"""``Spending``: usage recorded with each turn, ``/usage``, and the budget (ADR 0061).

One object the kernel assembles once: the ``UsageMeter`` (the orchestrator's
agent hooks) counts each model response under its turn and model; the turn
runner asks ``records`` for the turn's rows when it concludes, which the
ledger commits with the turn; the router asks ``before_turn`` before a turn
(the budget admits it and holds its estimate), ``after_turn`` after one, and
``end_turn`` when it ends however it ends (the hold goes; ADR 0075);
``/usage`` reads the ``UsageBook``.
The router's default is ``NO_SPENDING``, which records and refuses nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from core.agents.usage_meter import UsageMeter
from core.config import ModelsSettings
from core.extensions.contract import Command, TurnContext
from core.kernel.conversations.ledger import LedgerWrite
from core.kernel.spending.budget import Budget, BudgetState
from core.kernel.spending.report import Periods, usage_lines
from core.kernel.spending.store import (
    UsageBook,
    UsageEntry,
    UsageRecord,
)
from core.kernel.spending.tool_runs import ToolRunJournal
from core.tools.clock import now_in

__all__ = ["NO_SPENDING", "Spending", "TurnSpending"]

OWNER = "owner"  # a turn with no person (a scheduled run) is the owner's


class TurnSpending(Protocol):
    """What the turn path asks of spending (the router, the turn runner).

    ``budgeted`` (chosen at assembly): whether a budget may refuse, hold or tell;
    without one the router asks ``before_turn`` only (a rerun's tool calls are
    counted afresh) and neither ``end_turn`` nor ``after_turn``."""

    budgeted: bool

    def records(self, turn: TurnContext) -> tuple[LedgerWrite, ...]: ...

    async def before_turn(self, turn: TurnContext, text: str = "") -> str | None:
        """A new run of ``turn`` (its message ``text``) starts: the line that refuses
        it (a spent budget), or ``None``; an admitted run holds its estimated cost
        until ``end_turn``."""
        ...

    async def after_turn(self, turn: TurnContext) -> str | None: ...

    async def end_turn(self, turn: TurnContext) -> None:
        """The run ``before_turn`` admitted ended, answered or not."""
        ...


class _NoSpending:
    """Records nothing, refuses nothing (a router built without a kernel: tests)."""

    budgeted = False

    def records(self, turn: TurnContext) -> tuple[LedgerWrite, ...]:
        return ()

    async def before_turn(self, turn: TurnContext, text: str = "") -> str | None:
        return None

    async def after_turn(self, turn: TurnContext) -> str | None:
        return None

    async def end_turn(self, turn: TurnContext) -> None:
        return None


NO_SPENDING: TurnSpending = _NoSpending()


class TurnBudget(Protocol):
    """What spending asks of the budget (``Budget``; ``_NoBudget`` with no limit)."""

    async def states(self, turn: TurnContext) -> list[BudgetState]: ...

    async def admit(self, turn: TurnContext, text: str = "") -> str | None: ...

    async def release(self, turn: TurnContext) -> None: ...

    def learn(self, entries: list[UsageEntry]) -> None: ...

    async def notice(self, turn: TurnContext) -> str | None: ...


class _NoBudget:
    """The budget's null object, chosen at assembly when ``models.budget`` sets no limit
    (ADR 0079): nothing to admit, hold, learn or tell; usage is still counted."""

    async def states(self, turn: TurnContext) -> list[BudgetState]:
        return []

    async def admit(self, turn: TurnContext, text: str = "") -> str | None:
        return None

    async def release(self, turn: TurnContext) -> None:
        return None

    def learn(self, entries: list[UsageEntry]) -> None:
        return None

    async def notice(self, turn: TurnContext) -> str | None:
        return None


class Spending:
    """Usage, cost and budget of the kernel's turns; see the module's docstring."""

    def __init__(
        self,
        models: ModelsSettings,
        book: UsageBook,
        *,
        timezone: str = "local",
        meter: UsageMeter | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.models = models
        self.book = book
        self.meter = meter or UsageMeter()
        self.now = now or (lambda: now_in(timezone))
        default = models.default
        self.budget: TurnBudget = _NoBudget()
        self.budgeted = models.budget.limited  # else the turn path asks the budget nothing
        if self.budgeted:
            self.budget = Budget(
                models.budget,
                models.prices,
                book,
                self.now,
                f"{default.provider}/{default.model}" if default is not None else None,
            )
        # its ``tap`` goes around every tool (the ``tool_runs`` layer, ADR 0079)
        self.tool_runs = ToolRunJournal(book)

    async def open(self) -> None:
        await self.book.open()

    async def aclose(self) -> None:
        await self.book.aclose()

    # ------------------------------------------------------------ the turn path

    def records(self, turn: TurnContext) -> tuple[LedgerWrite, ...]:
        """The turn's usage rows (none when no model answered), for its commit."""
        by_model = self.meter.take(turn.turn_id)
        self.tool_runs.forget(turn.turn_id)
        person = turn.person or OWNER
        if self.budgeted:
            self.budget.learn([UsageEntry(person, m, used) for m, used in by_model.items()])
        if turn.turn_id is None:
            return ()
        return (
            UsageRecord(
                turn.turn_id, turn.session_id or "", turn.channel_id or "", person, by_model
            ),
        )

    async def before_turn(self, turn: TurnContext, text: str = "") -> str | None:
        self.tool_runs.forget(turn.turn_id)  # a rerun counts its tool calls afresh
        return await self.budget.admit(turn, text) if self.budgeted else None

    async def after_turn(self, turn: TurnContext) -> str | None:
        return await self.budget.notice(turn)

    async def end_turn(self, turn: TurnContext) -> None:
        await self.budget.release(turn)

    # ------------------------------------------------------------ /usage

    def command(self) -> Command:
        async def usage(args: str, turn: TurnContext) -> str:
            return await self.usage_text(turn)

        return Command("usage", "tokens and cost: this conversation, today, this month", usage)

    async def usage_text(self, turn: TurnContext) -> str:
        """This conversation, today and this month: the owner's view covers the
        household, person by person; a member's only their own."""
        periods = Periods.at(self.now())
        person = None if turn.role == "owner" else (turn.person or OWNER)
        prices, currency = self.models.prices, self.models.budget.currency
        conversation = await self.book.totals(0.0, session_id=turn.session_id or "")
        today = await self.book.totals(periods.day_start, person=person)
        month = await self.book.totals(periods.month_start, person=person)
        lines = [
            *usage_lines("This conversation", conversation, prices, currency),
            *usage_lines(f"Today ({periods.day})", today, prices, currency),
            *usage_lines(f"This month ({periods.month})", month, prices, currency),
        ]
        if person is None and len({e.person for e in month}) > 1:
            lines.append("This month per person:")
            for name, own in sorted(_per_person(month).items()):
                lines.extend("  " + line for line in usage_lines(name, own, prices, currency))
        for state in await self.budget.states(turn):
            lines.append(
                f"Budget {state.name}: {state.spent:.2f} of {state.limit:.2f} {currency}"
                f" ({state.share:.0%})"
            )
        if not prices:
            lines.append("No prices set: costs need models.prices in settings (per 1M tokens).")
        return "\n".join(lines)


def _per_person(entries: list[UsageEntry]) -> dict[str, list[UsageEntry]]:
    people: dict[str, list[UsageEntry]] = defaultdict(list)
    for entry in entries:
        people[entry.person].append(entry)
    return people
