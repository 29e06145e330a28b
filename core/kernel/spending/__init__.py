"""What the model costs: usage per turn in the ledger, ``/usage``, prices, budgets
(SPEC §11, ADR 0061)."""

from core.kernel.spending.budget import Budget, BudgetState
from core.kernel.spending.report import Periods, UsageSummary, price_of, summarise, usage_table
from core.kernel.spending.service import NO_SPENDING, Spending, TurnSpending, usage_book_for
from core.kernel.spending.store import (
    USAGE_COMPONENT,
    PostgresUsageBook,
    SQLiteUsageBook,
    UsageBook,
    UsageEntry,
    UsageRecord,
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
