"""What post-processing leaves with a turn, written with the turn's ledger row.

A ``PostTurnRecord`` holds the user's original text, the clean text the
model saw, the specs, every result, the progress events and the token
totals. The router hands it to ``LedgerSession.commit_turn``, which calls
``write`` inside the same transaction as the reply and the history: a turn
is recorded whole or not at all, and ``/last`` reads it back after any
restart. Rows are keyed by the message (the ledger key) and pruned with the
ledger's retention.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.contract import PostProcessResult
from core.kernel.postprocess.parsing import PostSpec

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "RECORDS_DDL",
    "PostRecords",
    "PostTurnRecord",
    "StoredResult",
    "latest_query",
    "stored_results",
]

RECORDS_DDL = (
    "CREATE TABLE IF NOT EXISTS hearth_post_turns ("
    " message_key TEXT PRIMARY KEY, conversation TEXT NOT NULL, session_id TEXT,"
    " original TEXT NOT NULL, clean TEXT NOT NULL, specs TEXT NOT NULL, events TEXT NOT NULL,"
    " usage TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hearth_post_results ("
    " message_key TEXT NOT NULL, seq INTEGER NOT NULL, conversation TEXT NOT NULL,"
    " name TEXT NOT NULL, result TEXT NOT NULL, created_at REAL NOT NULL,"
    " PRIMARY KEY (message_key, seq))",
    "CREATE INDEX IF NOT EXISTS hearth_post_results_by_name"
    " ON hearth_post_results(conversation, name, created_at)",
)


@dataclass(frozen=True, slots=True)
class PostTurnRecord:
    """One message's post-processing: the specs it asked for and what they gave."""

    message_key: str
    conversation: str
    session_id: str | None
    original: str
    clean: str
    specs: tuple[PostSpec, ...]
    results: tuple[PostProcessResult, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    usage: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    def write(self, conn: sqlite3.Connection) -> None:
        """Insert the rows (inside the ledger's open transaction)."""
        conn.execute(
            "INSERT OR REPLACE INTO hearth_post_turns"
            "(message_key, conversation, session_id, original, clean, specs, events, usage,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self._turn_row(),
        )
        conn.executemany(
            "INSERT OR REPLACE INTO hearth_post_results"
            "(message_key, seq, conversation, name, result, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            self._result_rows(),
        )

    async def write_postgres(self, conn: asyncpg.Connection) -> None:
        """The same rows in PostgreSQL (inside the ledger's open transaction there)."""
        await conn.execute(
            "INSERT INTO hearth_post_turns"
            "(message_key, conversation, session_id, original, clean, specs, events, usage,"
            " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (message_key) DO UPDATE SET conversation = excluded.conversation,"
            " session_id = excluded.session_id, original = excluded.original,"
            " clean = excluded.clean, specs = excluded.specs, events = excluded.events,"
            " usage = excluded.usage, created_at = excluded.created_at",
            *self._turn_row(),
        )
        await conn.executemany(
            "INSERT INTO hearth_post_results"
            "(message_key, seq, conversation, name, result, created_at)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (message_key, seq) DO UPDATE SET"
            " conversation = excluded.conversation, name = excluded.name,"
            " result = excluded.result, created_at = excluded.created_at",
            self._result_rows(),
        )

    def _turn_row(self) -> tuple[Any, ...]:
        return (
            self.message_key,
            self.conversation,
            self.session_id,
            self.original,
            self.clean,
            json.dumps([s.to_dict() for s in self.specs]),
            json.dumps(list(self.events), default=str),
            json.dumps(self.usage),
            self.created_at,
        )

    def _result_rows(self) -> list[tuple[Any, ...]]:
        return [
            (
                self.message_key,
                seq,
                self.conversation,
                result.name,
                json.dumps(result.to_dict(), default=str),
                self.created_at,
            )
            for seq, result in enumerate(self.results)
        ]


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A result read back, with the message it answered."""

    result: PostProcessResult
    original: str
    created_at: float


class PostRecords:
    """Creates the tables and reads them back for ``/last`` (in a worker thread).
    ``PostgresPostRecords`` (``records_pg``) does the same in PostgreSQL."""

    def __init__(self, db_path: Path, *, retention_s: float) -> None:
        self.db_path = db_path
        self.retention_s = retention_s

    async def aclose(self) -> None:
        """Nothing held: each call opens and closes its connection."""

    async def open(self) -> None:
        """Create the tables and drop records older than the ledger keeps turns."""
        await asyncio.to_thread(self._create)

    async def latest(self, conversation: str, name: str | None = None) -> list[StoredResult]:
        """The newest result named ``name``, or every result of the newest turn."""
        return await asyncio.to_thread(self._latest, conversation, name)

    def _connect(self) -> closing[sqlite3.Connection]:
        return closing(sqlite3.connect(self.db_path, timeout=30))

    def _create(self) -> None:
        cutoff = time.time() - self.retention_s
        with self._connect() as conn:
            for statement in RECORDS_DDL:
                conn.execute(statement)
            conn.execute("DELETE FROM hearth_post_results WHERE created_at < ?", (cutoff,))
            conn.execute("DELETE FROM hearth_post_turns WHERE created_at < ?", (cutoff,))
            conn.commit()

    def _latest(self, conversation: str, name: str | None) -> list[StoredResult]:
        query, args = latest_query(conversation, name, "?", "rowid")
        with self._connect() as conn:
            rows = conn.execute(query, args).fetchall()
        return stored_results(rows, name)


def latest_query(
    conversation: str, name: str | None, mark: str, order: str
) -> tuple[str, list[str]]:
    """``/last``'s query and arguments; ``mark`` is ``?`` (SQLite) or ``$`` (numbered,
    PostgreSQL), ``order`` the column that breaks ties of ``created_at``."""
    args = [conversation] if name is None else [conversation, name]
    marks = [mark if mark == "?" else f"${n}" for n in range(1, len(args) + 1)]
    where = "r.conversation = " + marks[0] + ("" if name is None else f" AND r.name = {marks[1]}")
    query = (
        "SELECT r.result, t.original, r.created_at FROM hearth_post_results r"
        " JOIN hearth_post_turns t ON t.message_key = r.message_key"
        f" WHERE {where} AND r.message_key = ("
        f"  SELECT r.message_key FROM hearth_post_results r WHERE {where}"
        f"  ORDER BY r.created_at DESC, r.{order} DESC LIMIT 1)"
        " ORDER BY r.seq"
    )
    return query, args if mark != "?" else [*args, *args]


def stored_results(rows: Any, name: str | None) -> list[StoredResult]:
    """Rows of ``latest_query`` as results (only those named ``name``, when given)."""
    found = [
        StoredResult(PostProcessResult.from_dict(json.loads(raw)), str(original), float(at))
        for raw, original, at in rows
    ]
    return [s for s in found if name is None or s.result.name == name]
