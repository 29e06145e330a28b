"""``main.py usage``: tokens and cost per day (or month), person and model.

Reads the usage the kernel recorded with each turn (``sessions.db``, or
PostgreSQL with ``storage.backend: postgres``); it needs no running kernel.
Costs come from ``models.prices`` (per million tokens); a model with no
price shows its tokens and no cost. ``--json`` prints one JSON object
(``rows`` and ``totals``) for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from datetime import datetime

from core.config import ModelPrice, Settings
from core.kernel.spending import Periods, UsageEntry, summarise, usage_book_for, usage_table
from core.runtime import SESSIONS_FILE
from core.tools.clock import now_in, resolve_timezone

__all__ = ["run_usage"]


def run_usage(settings: Settings, args: argparse.Namespace) -> int:
    if args.days < 1:
        print(f"hearth: --days {args.days}: give at least 1")
        return 2
    return asyncio.run(_usage(settings, args.days, args.by, args.json))


async def _usage(settings: Settings, days: int, by: str, as_json: bool) -> int:
    now = now_in(settings.timezone)
    zone = resolve_timezone(settings.timezone)
    shown = Periods.days_back(now, days)
    if by == "month":  # whole months: from the first of the oldest one
        shown = datetime.fromtimestamp(shown, zone).replace(day=1).timestamp()
    since = min(shown, Periods.at(now).month_start)  # the totals show this month
    book = usage_book_for(settings, settings.data_dir / SESSIONS_FILE)
    await book.open()
    try:
        entries = await book.entries(since)
    finally:
        await book.aclose()
    fmt = "%Y-%m-%d" if by == "day" else "%Y-%m"

    def period_of(at: float) -> str:
        return datetime.fromtimestamp(at, zone).strftime(fmt)

    prices, currency = settings.models.prices, settings.models.budget.currency
    rows = usage_table(
        [e for e in entries if e.created_at >= shown], prices, currency, by, period_of
    )
    totals = _totals(entries, now, prices, currency)
    if as_json:
        print(json.dumps({"rows": rows, "totals": totals}, indent=2))
        return 0
    print(f"{by:<10} {'person':<16} {'model':<32} {'input':>10} {'cached':>10} {'output':>10} cost")
    for row in rows:
        cost = "no price" if row["cost"] is None else f"{row['cost']:.4f} {currency}"
        print(
            f"{row[by]!s:<10} {row['person']!s:<16} {row['model']!s:<32} "
            f"{row['input_tokens']:>10,} {row['cached_input_tokens']:>10,} "
            f"{row['output_tokens']:>10,} {cost}"
        )
    if not rows:
        print(f"(no turns in the last {days} days)")
    for name, total in totals.items():
        print(f"{name}: {total['tokens']:,} tokens, {total['cost_text']}")
    if not prices:
        print("No prices set: add models.prices to settings (per 1M tokens) to see costs.")
    return 0


def _totals(
    entries: list[UsageEntry], now: datetime, prices: Mapping[str, ModelPrice], currency: str
) -> dict[str, dict[str, object]]:
    periods = Periods.at(now)
    out: dict[str, dict[str, object]] = {}
    for name, start in (("today", periods.day_start), ("this month", periods.month_start)):
        summary = summarise((e for e in entries if e.created_at >= start), prices)
        out[name] = {
            "tokens": summary.usage.total_tokens,
            "cost": round(summary.cost, 6),
            "unpriced": sorted(summary.unpriced),
            "cost_text": summary.cost_text(currency),
        }
    return out
