"""Usage as people read it: tokens and cost per period, person and model.

Prices come from ``models.prices`` (per million tokens, the user's own
numbers: none ship as facts); a model is looked up as ``provider/model``,
then as its bare id. A model with no price shows its tokens and no cost, and
the total says that a price is missing, so a sum never looks complete when it
is not. Periods are the user's (``settings.timezone``): today from local
midnight, this month from the 1st.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from core.agents.usage import TurnUsage
from core.config import ModelPrice
from core.kernel.spending.store import UsageEntry

__all__ = [
    "Periods",
    "UsageSummary",
    "price_of",
    "summarise",
    "usage_lines",
    "usage_table",
]


@dataclass(frozen=True, slots=True)
class Periods:
    """Where today and this month began, in epoch seconds (the user's zone), and
    their names (the budget's "told once" marks are keyed by them)."""

    day_start: float
    month_start: float
    day: str  # 2026-11-26
    month: str  # 2026-11

    @classmethod
    def at(cls, now: datetime) -> Periods:
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        first = midnight.replace(day=1)
        return cls(
            midnight.timestamp(),
            first.timestamp(),
            midnight.strftime("%Y-%m-%d"),
            first.strftime("%Y-%m"),
        )

    @staticmethod
    def days_back(now: datetime, days: int) -> float:
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return (midnight - timedelta(days=days - 1)).timestamp()


def price_of(prices: Mapping[str, ModelPrice], model: str) -> ModelPrice | None:
    """``model``'s price: as ``provider/model``, else as its bare id."""
    return prices.get(model) or prices.get(model.partition("/")[2] or model)


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Tokens and cost of a set of entries; ``unpriced``: models with no price."""

    usage: TurnUsage
    cost: float
    unpriced: frozenset[str]

    def cost_text(self, currency: str) -> str:
        text = f"{self.cost:.4f} {currency}" if self.cost < 1 else f"{self.cost:.2f} {currency}"
        if self.unpriced:
            text += f" (no price for {', '.join(sorted(self.unpriced))})"
        return text


def summarise(entries: Iterable[UsageEntry], prices: Mapping[str, ModelPrice]) -> UsageSummary:
    usage, cost, unpriced = TurnUsage(), 0.0, set()
    for entry in entries:
        usage += entry.usage
        price = price_of(prices, entry.model)
        if price is None:
            if entry.usage.total_tokens:
                unpriced.add(entry.model)
            continue
        u = entry.usage
        cost += price.cost(u.input_tokens, u.cached_input_tokens, u.output_tokens)
    return UsageSummary(usage, cost, frozenset(unpriced))


def _tokens(usage: TurnUsage) -> str:
    return (
        f"{usage.input_tokens:,} in ({usage.cached_input_tokens:,} cached), "
        f"{usage.output_tokens:,} out"
    )


def usage_lines(
    title: str, entries: list[UsageEntry], prices: Mapping[str, ModelPrice], currency: str
) -> list[str]:
    """``title: tokens, cost`` and one indented line per model (none when empty)."""
    total = summarise(entries, prices)
    if not entries:
        return [f"{title}: nothing yet"]
    lines = [f"{title}: {_tokens(total.usage)} — {total.cost_text(currency)}"]
    by_model: dict[str, list[UsageEntry]] = defaultdict(list)
    for entry in entries:
        by_model[entry.model].append(entry)
    if len(by_model) > 1:
        for model, own in sorted(by_model.items()):
            part = summarise(own, prices)
            lines.append(f"  {model}: {_tokens(part.usage)} — {part.cost_text(currency)}")
    return lines


def usage_table(
    entries: list[UsageEntry],
    prices: Mapping[str, ModelPrice],
    currency: str,
    bucket: str,
    period_of: Callable[[float], str],
) -> list[dict[str, object]]:
    """Rows of ``main.py usage``: one per (period, person, model); ``bucket`` names
    the period column, ``period_of`` gives an entry's period from its time."""
    groups: dict[tuple[str, str, str], list[UsageEntry]] = defaultdict(list)
    for entry in entries:
        groups[period_of(entry.created_at), entry.person, entry.model].append(entry)
    rows: list[dict[str, object]] = []
    for (period, person, model), own in sorted(groups.items()):
        part = summarise(own, prices)
        rows.append(
            {
                bucket: period,
                "person": person,
                "model": model,
                "input_tokens": part.usage.input_tokens,
                "cached_input_tokens": part.usage.cached_input_tokens,
                "output_tokens": part.usage.output_tokens,
                "cost": None if part.unpriced else round(part.cost, 6),
                "currency": currency,
            }
        )
    return rows
