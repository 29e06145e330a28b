"""What the model costs: usage per turn in the ledger, ``/usage``, prices, budgets
(SPEC §11, ADR 0061).

The door is lazy (PEP 562): ``main.py usage`` reads the usage book and prices
without importing the model layer that budgets answer to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.spending.budget import Budget, BudgetState
    from core.kernel.spending.report import Periods, UsageSummary, price_of, summarise, usage_table
    from core.kernel.spending.service import NO_SPENDING, Spending, TurnSpending
    from core.kernel.spending.store import (
        USAGE_COMPONENT,
        PostgresUsageBook,
        SQLiteUsageBook,
        UsageBook,
        UsageEntry,
        UsageRecord,
        usage_book_for,
    )

__all__ = [
    "NO_SPENDING",
    "USAGE_COMPONENT",
    "Budget",
    "BudgetState",
    "Periods",
    "PostgresUsageBook",
    "SQLiteUsageBook",
    "Spending",
    "TurnSpending",
    "UsageBook",
    "UsageEntry",
    "UsageRecord",
    "UsageSummary",
    "price_of",
    "summarise",
    "usage_book_for",
    "usage_table",
]

_HOMES = {
    "Budget": "budget",
    "BudgetState": "budget",
    "Periods": "report",
    "UsageSummary": "report",
    "price_of": "report",
    "summarise": "report",
    "usage_table": "report",
    "NO_SPENDING": "service",
    "Spending": "service",
    "TurnSpending": "service",
    "usage_book_for": "store",
    "USAGE_COMPONENT": "store",
    "PostgresUsageBook": "store",
    "SQLiteUsageBook": "store",
    "UsageBook": "store",
    "UsageEntry": "store",
    "UsageRecord": "store",
}

__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
