"""Where usage is kept: one row per turn and serving model, next to the ledger.

``UsageRecord`` is a ``LedgerWrite``: a turn's rows are inserted in the
transaction that commits the turn (``commit_turn``), so a turn is counted
exactly when it is answered — never twice after a crash and a redelivery,
never for a turn whose answer was lost. The rows live in ``sessions.db``
(SQLite) or in the ``usage`` schema component (PostgreSQL, its own
migrations), in a table of their own (``hearth_usage``): the ledger's rows
are pruned after a month, usage is kept for the yearly view. The budget's
"told once" marks are kept there too (``hearth_budget_notices``). The book is
written once against ``core.storage`` (ADR 0080): in the kernel it uses the
session storage's database — on SQLite the ledger's one connection, on
PostgreSQL the process's pool — and the tables are migrated by the one runner.

``UsageBook`` reads them back, summed per person and model, for ``/usage``,
``main.py usage`` and the budget.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from core.agents.usage import TurnUsage
from core.storage import (
    Database,
    Executor,
    PostgresDatabase,
    SQLiteDatabase,
    apply_migrations,
    register_migrations,
    upsert,
)

if TYPE_CHECKING:
    from core.config import Settings, StorageSettings

__all__ = [
    "USAGE_COMPONENT",
    "USAGE_RETENTION_S",
    "PostgresUsageBook",
    "SQLiteUsageBook",
    "UsageBook",
    "UsageEntry",
    "UsageRecord",
    "usage_book_for",
]

USAGE_COMPONENT = "usage"
USAGE_RETENTION_S = 400 * 86400.0  # a year and a month of daily and monthly views

_COLUMNS = (
    "message_key, model, session_id, channel_id, person, created_at,"
    " input_tokens, cached_tokens, output_tokens, requests"
)
_ROW = f"({', '.join('?' * 10)})"
# version 1 is what the code before the runner created at every open (IF NOT EXISTS:
# a ``sessions.db`` that has the tables keeps them and their rows)
_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS hearth_usage (
    message_key TEXT NOT NULL, model TEXT NOT NULL, session_id TEXT NOT NULL,
    channel_id TEXT NOT NULL, person TEXT NOT NULL, created_at REAL NOT NULL,
    input_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, requests INTEGER NOT NULL,
    PRIMARY KEY (message_key, model));
CREATE INDEX IF NOT EXISTS hearth_usage_by_time ON hearth_usage (created_at);
CREATE TABLE IF NOT EXISTS hearth_budget_notices (
    period TEXT PRIMARY KEY, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS hearth_tool_runs (
    turn_id TEXT NOT NULL, call_key TEXT NOT NULL, output TEXT NOT NULL,
    created_at REAL NOT NULL, PRIMARY KEY (turn_id, call_key));
"""
TOOL_RUNS_RETENTION_S = 2 * 86400.0  # a turn is retried within minutes, never days later
_V1 = """
CREATE TABLE hearth_usage (
    message_key   text NOT NULL,
    model         text NOT NULL,
    session_id    text NOT NULL,
    channel_id    text NOT NULL,
    person        text NOT NULL,
    created_at    double precision NOT NULL,
    input_tokens  bigint NOT NULL,
    cached_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    requests      integer NOT NULL,
    PRIMARY KEY (message_key, model)
);
CREATE INDEX hearth_usage_by_time ON hearth_usage (created_at);
CREATE TABLE hearth_budget_notices (
    period     text PRIMARY KEY,
    created_at double precision NOT NULL
);
CREATE TABLE hearth_tool_runs (
    turn_id    text NOT NULL,
    call_key   text NOT NULL,
    output     text NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (turn_id, call_key)
);
"""
register_migrations(USAGE_COMPONENT, (_V1,), sqlite=(_SQLITE_V1,))
_TOOL_RUN = upsert(
    "hearth_tool_runs", ("turn_id", "call_key", "output", "created_at"), ("turn_id", "call_key")
)


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """Tokens one model used for one person (in one turn, or summed over many)."""

    person: str
    model: str
    usage: TurnUsage
    created_at: float = 0.0
    session_id: str = ""


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """A turn's usage rows, written inside the ledger's transaction (``LedgerWrite``)."""

    message_key: str
    session_id: str
    channel_id: str
    person: str
    by_model: Mapping[str, TurnUsage]

    def _rows(self) -> list[tuple[Any, ...]]:
        now = time.time()
        return [
            (
                self.message_key,
                model,
                self.session_id,
                self.channel_id,
                self.person,
                now,
                u.input_tokens,
                u.cached_input_tokens,
                u.output_tokens,
                u.requests,
            )
            for model, u in sorted(self.by_model.items())
        ]

    async def write_to(self, tx: Executor) -> None:
        """The turn's rows (one statement, a row per model), and its tool-run journal
        gone (the turn is answered)."""
        await tx.write("DELETE FROM hearth_tool_runs WHERE turn_id = ?", self.message_key)
        rows = self._rows()
        if rows:
            values = ", ".join([_ROW] * len(rows))
            await tx.write(
                f"INSERT INTO hearth_usage ({_COLUMNS}) VALUES {values} ON CONFLICT DO NOTHING",
                *chain.from_iterable(rows),
            )


class UsageBook(Protocol):
    """Usage read back (either backend)."""

    async def open(self) -> None: ...

    async def totals(
        self, since: float, *, person: str | None = None, session_id: str | None = None
    ) -> list[UsageEntry]:
        """Summed per (person, model) from ``since`` (epoch seconds) on."""
        ...

    async def entries(self, since: float) -> list[UsageEntry]:
        """Every row from ``since`` on, oldest first (the per-day view)."""
        ...

    async def first_notice(self, period: str) -> bool:
        """Mark ``period`` told; ``True`` only the first time (any process)."""
        ...

    async def tool_output(self, turn_id: str, call_key: str) -> str | None:
        """The recorded output of a tool call of a turn not yet committed."""
        ...

    async def record_tool(self, turn_id: str, call_key: str, output: str) -> None: ...

    async def aclose(self) -> None: ...


_TOTALS = (
    "SELECT person, model, SUM(input_tokens), SUM(cached_tokens), SUM(output_tokens),"
    " SUM(requests) FROM hearth_usage WHERE created_at >= {since}{where}"
    " GROUP BY person, model ORDER BY person, model"
)
_ENTRIES = (
    "SELECT person, model, input_tokens, cached_tokens, output_tokens, requests, created_at,"
    " session_id FROM hearth_usage WHERE created_at >= {since} ORDER BY created_at"
)


def _entry(row: Sequence[Any]) -> UsageEntry:
    usage = TurnUsage(int(row[2]), int(row[3]), int(row[4]), int(row[5]))
    extra = (float(row[6]), str(row[7])) if len(row) > 6 else (0.0, "")
    return UsageEntry(str(row[0]), str(row[1]), usage, *extra)


class _StoredUsageBook:
    """The usage book written once against ``Database`` (ADR 0051, 0080): the ``usage``
    component's tables, migrated by the one runner on whichever database it is given.
    ``owned``: this book opened the database and closes it; otherwise the database is
    another store's (the session storage's: the ledger's connection, or the process's
    pool) and its owner closes it."""

    def __init__(self, db: Database, *, owned: bool = True) -> None:
        self.db = db
        self.owned = owned
        # turn -> when a tool run of it was last recorded, oldest first: on a database
        # only this process writes (SQLite), what a turn with no entry would read is
        # known to be nothing — a fresh turn's tool calls read nothing (ADR 0080)
        self._recorded: OrderedDict[str, float] | None = None

    async def open(self) -> None:
        """Open (a database shared with the ledger is opened once), migrate the usage
        tables (a database written before them gets them now), prune."""
        await self.db.open()
        await apply_migrations(self.db, [USAGE_COMPONENT])
        now = time.time()
        async with self.db.transaction() as tx:
            cutoff = now - USAGE_RETENTION_S
            await tx.write("DELETE FROM hearth_usage WHERE created_at < ?", cutoff)
            await tx.write("DELETE FROM hearth_budget_notices WHERE created_at < ?", cutoff)
            stale = now - TOOL_RUNS_RETENTION_S
            await tx.write("DELETE FROM hearth_tool_runs WHERE created_at < ?", stale)
            left = await tx.fetch_all(
                "SELECT turn_id, MAX(created_at) FROM hearth_tool_runs GROUP BY turn_id ORDER BY 2"
            )
        if not self.db.shared:  # other processes write PostgreSQL: always read there
            self._recorded = OrderedDict((str(turn), float(at)) for turn, at in left)

    async def totals(
        self, since: float, *, person: str | None = None, session_id: str | None = None
    ) -> list[UsageEntry]:
        where, args = "", list[Any]()
        args.append(since)
        for column, value in (("person", person), ("session_id", session_id)):
            if value is not None:
                where += f" AND {column} = ?"
                args.append(value)
        rows = await self.db.fetch_all(_TOTALS.format(since="?", where=where), *args)
        return [_entry(r) for r in rows]

    async def entries(self, since: float) -> list[UsageEntry]:
        return [_entry(r) for r in await self.db.fetch_all(_ENTRIES.format(since="?"), since)]

    async def first_notice(self, period: str) -> bool:
        inserted = await self.db.fetch_value(
            "INSERT INTO hearth_budget_notices (period, created_at) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING RETURNING 1",
            period,
            time.time(),
        )
        return inserted is not None

    async def tool_output(self, turn_id: str, call_key: str) -> str | None:
        if self._recorded is not None and turn_id not in self._recorded:
            return None  # nothing recorded for this turn (a first run): no read
        row = await self.db.fetch_one(
            "SELECT output FROM hearth_tool_runs WHERE turn_id = ? AND call_key = ?",
            turn_id,
            call_key,
        )
        return None if row is None else str(row[0])

    async def record_tool(self, turn_id: str, call_key: str, output: str) -> None:
        now = time.time()
        await self.db.write(_TOOL_RUN, turn_id, call_key, output, now)
        recorded = self._recorded
        if recorded is not None:  # kept for the retention of the rows (pruned at open)
            recorded[turn_id] = now
            recorded.move_to_end(turn_id)
            stale = now - TOOL_RUNS_RETENTION_S
            while recorded and next(iter(recorded.values())) < stale:
                recorded.popitem(last=False)

    async def aclose(self) -> None:
        """Close the database when this book opened it (its owner closes a shared one)."""
        if self.owned:
            await self.db.close()


class SQLiteUsageBook(_StoredUsageBook):
    """``hearth_usage`` in ``sessions.db``: on ``database`` (the session storage's own
    connection, in the kernel), else on a connection of its own (``main.py usage``)."""

    def __init__(self, db_path: Path, database: Database | None = None) -> None:
        self.db_path = db_path
        own = database is None
        super().__init__(database or SQLiteDatabase(db_path, wal=True), owned=own)


class PostgresUsageBook(_StoredUsageBook):
    """The ``usage`` component's tables in PostgreSQL, through the process's pool (on
    ``database``, the session storage's, in the kernel)."""

    def __init__(self, storage: StorageSettings, database: Database | None = None) -> None:
        own = database is None
        what = "the PostgreSQL usage book is"
        super().__init__(database or PostgresDatabase(storage, (), what), owned=own)


def usage_book_for(
    settings: Settings, db_path: Path, database: Database | None = None
) -> UsageBook:
    """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``sessions.db``);
    on ``database`` when given (the kernel's session storage: one connection, or one
    pool, for the ledger and the usage written in its transactions)."""
    if settings.storage.backend == "postgres":
        return PostgresUsageBook(settings.storage, database)
    return SQLiteUsageBook(db_path, database)
