"""What the model costs: usage per turn in the ledger, ``/usage``, prices, budgets
(SPEC §11, ADR 0061).

The door is lazy (PEP 562): ``main.py usage`` reads the usage book and prices
without importing the model layer that budgets answer to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.spending.budget import (
        Budget as Budget,
        BudgetState as BudgetState,
    )
    from core.kernel.spending.report import (
        Periods as Periods,
        UsageSummary as UsageSummary,
        price_of as price_of,
        summarise as summarise,
        usage_table as usage_table,
    )
    from core.kernel.spending.service import (
        NO_SPENDING as NO_SPENDING,
        Spending as Spending,
        TurnSpending as TurnSpending,
    )
    from core.kernel.spending.store import (
        USAGE_COMPONENT as USAGE_COMPONENT,
        PostgresUsageBook as PostgresUsageBook,
        SQLiteUsageBook as SQLiteUsageBook,
        UsageBook as UsageBook,
        UsageEntry as UsageEntry,
        UsageRecord as UsageRecord,
        usage_book_for as usage_book_for,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
