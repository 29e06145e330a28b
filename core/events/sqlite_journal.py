"""SQLite journal (aiosqlite, WAL): the embedded default backend of the bus.

One connection, and so one thread, does all the writing. A batch runs as a
single function on that thread (see ``sqlite_batch``), so a group commit costs
one thread hop however many publishes, acks and claims it carries. The
inspection calls open a short-lived connection of their own when the journal
is not open, so ``main.py events`` works while a kernel holds the file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiosqlite

from core.events.errors import JournalError
from core.events.journal import (
    BatchResult,
    DeadLetter,
    DeliveryInfo,
    EventRecord,
    WriteBatch,
)
from core.events.sqlite_batch import SCHEMA, SCHEMA_VERSION, FanoutState, apply_batch, purge_chunk

__all__ = ["SQLiteJournal"]

T = TypeVar("T")

_STATUSES = ("pending", "inflight", "done", "dead")


class SQLiteJournal:
    """Event journal in one SQLite file. ``synchronous``: ``normal`` (survives a process
    crash) or ``full`` (also survives power loss)."""

    def __init__(
        self, path: str | Path, *, synchronous: Literal["normal", "full"] = "normal"
    ) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError(
                f"SQLiteJournal synchronous must be 'normal' or 'full', got {synchronous!r}"
            )
        self.path = Path(path)
        self.synchronous = synchronous
        self._db: aiosqlite.Connection | None = None
        self._fanout = FanoutState()

    def __repr__(self) -> str:
        return f"SQLiteJournal({str(self.path)!r}, synchronous={self.synchronous!r})"

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_open(self) -> bool:
        return self._db is not None

    async def open(self) -> None:
        """Open (creating file and schema if needed). Opening twice is a no-op."""
        if self._db is not None:
            return
        self._db = await self._connect()
        (head,) = await self._run(_head_id)
        self._fanout = FanoutState(last_id=head)

    async def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await db.close()

    async def _connect(self) -> aiosqlite.Connection:
        try:
            await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
            db = await aiosqlite.connect(self.path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise JournalError(str(self.path), f"cannot open event journal: {exc}") from exc
        try:
            await _require_json_functions(db, str(self.path))
            await db.execute("PRAGMA journal_mode = WAL")
            await db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
            await db.execute("PRAGMA busy_timeout = 10000")
            async with db.execute("PRAGMA user_version") as cur:
                row = await cur.fetchone()
            version = row[0] if row else 0
            if version > SCHEMA_VERSION:
                raise JournalError(
                    str(self.path),
                    f"journal schema version {version} is newer than this code ({SCHEMA_VERSION})",
                )
            await db.executescript(SCHEMA)
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            await db.close()
            raise JournalError(str(self.path), f"not a usable event journal: {exc}") from exc
        except BaseException:
            await db.close()
            raise
        return db

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(sqlite3_connection, *args)`` on the connection's own thread: one hop."""
        db = self._db
        if db is None:
            raise JournalError(str(self.path), "journal is not open")
        result: T = await db._execute(fn, db._conn, *args)  # type: ignore[no-untyped-call]
        return result

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[SQLiteJournal]:
        """This journal if open, else a temporary open copy (for inspection calls)."""
        if self._db is not None:
            yield self
            return
        temp = SQLiteJournal(self.path, synchronous=self.synchronous)
        await temp.open()
        try:
            yield temp
        finally:
            await temp.close()

    # ------------------------------------------------------------------ bus side

    async def commit(self, batch: WriteBatch) -> BatchResult:
        """Apply one group commit; see ``WriteBatch`` for the order of operations."""
        return await self._run(apply_batch, self._fanout, batch)

    async def purge(self, older_than: float, keep_subscribers: Collection[str] = ()) -> int:
        """Delete finished events created before ``older_than`` (Unix time); returns how many."""
        total = 0
        async with self._session() as j:
            while True:
                n = await j._run(purge_chunk, older_than, time.time(), tuple(keep_subscribers))
                total += n
                if n == 0:
                    return total

    async def forget_subscribers(self, prefix: str, keep: Collection[str] = ()) -> list[str]:
        """Delete subscribers whose id starts with ``prefix`` and is not in ``keep``,
        with their unfinished deliveries; returns the ids forgotten (sorted).

        For subscriptions an extension no longer holds: without this, every
        subscriber id it ever used keeps a row and collects deliveries.
        """
        async with self._session() as j:
            return await j._run(_forget_subscribers, prefix, frozenset(keep))

    # ------------------------------------------------------------------ inspection

    async def recent_events(self, limit: int = 20, topic: str | None = None) -> list[EventRecord]:
        """The newest ``limit`` events (optionally one topic), newest first, with deliveries."""
        async with self._session() as j:
            return await j._run(_recent_events, limit, topic)

    async def dead_letters(self, limit: int = 50) -> list[DeadLetter]:
        """Dead deliveries, most recently failed first, with the error that killed them."""
        async with self._session() as j:
            return await j._run(_dead_letters, limit)

    async def requeue(self, event_id: int, subscriber_id: str | None = None) -> int:
        """Put dead deliveries of ``event_id`` back to pending (attempts reset); returns how many.

        A running bus picks them up at its next poll (``poll_interval_s``).
        """
        async with self._session() as j:
            return await j._run(_requeue, event_id, subscriber_id, time.time())

    async def counts(self) -> dict[str, int]:
        """Deliveries by status (``pending``, ``inflight``, ``done``, ``dead``) and ``events``."""
        async with self._session() as j:
            return await j._run(_counts)


async def _require_json_functions(db: aiosqlite.Connection, path: str) -> None:
    """Batches pass event ids as JSON arrays (``json_each``): built into SQLite since 3.38."""
    try:
        async with db.execute("SELECT value FROM json_each('[1]')") as cur:
            await cur.fetchall()
    except sqlite3.OperationalError as exc:
        raise JournalError(
            path, f"SQLite {sqlite3.sqlite_version} has no JSON functions (json_each): {exc}"
        ) from exc


# ---------------------------------------------------------------------- thread-side queries


def _forget_subscribers(conn: sqlite3.Connection, prefix: str, keep: frozenset[str]) -> list[str]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute(
            "SELECT id FROM subscribers WHERE substr(id, 1, ?) = ? ORDER BY id",
            (len(prefix), prefix),
        ).fetchall()
        ids = [row[0] for row in rows if row[0] not in keep]
        conn.executemany(
            "DELETE FROM deliveries WHERE subscriber_id = ? AND status IN ('pending', 'inflight')",
            [(i,) for i in ids],
        )
        conn.executemany("DELETE FROM subscribers WHERE id = ?", [(i,) for i in ids])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return ids


def _head_id(conn: sqlite3.Connection) -> tuple[int]:
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
    return (int(row[0]) if row else 0,)


def _recent_events(conn: sqlite3.Connection, limit: int, topic: str | None) -> list[EventRecord]:
    cols = "id, topic, source, payload, correlation_id, idempotency_key, created_at"
    if topic is None:
        rows = conn.execute(f"SELECT {cols} FROM events ORDER BY id DESC LIMIT ?", (limit,))
    else:
        rows = conn.execute(
            f"SELECT {cols} FROM events WHERE topic = ? ORDER BY id DESC LIMIT ?", (topic, limit)
        )
    records = []
    for row in rows.fetchall():
        deliveries = tuple(
            DeliveryInfo(subscriber_id=d[0], status=d[1], attempt=d[2], error=d[3])
            for d in conn.execute(
                "SELECT subscriber_id, status, attempt, error FROM deliveries"
                " WHERE event_id = ? ORDER BY subscriber_id",
                (row[0],),
            )
        )
        records.append(
            EventRecord(
                id=row[0],
                topic=row[1],
                source=row[2],
                payload=json.loads(row[3]),
                correlation_id=row[4],
                idempotency_key=row[5],
                created_at=row[6],
                deliveries=deliveries,
            )
        )
    return records


def _dead_letters(conn: sqlite3.Connection, limit: int) -> list[DeadLetter]:
    rows = conn.execute(
        "SELECT d.event_id, d.subscriber_id, e.topic, e.source, d.attempt, d.error,"
        " e.created_at, d.updated_at FROM deliveries d JOIN events e ON e.id = d.event_id"
        " WHERE d.status = 'dead' ORDER BY d.updated_at DESC LIMIT ?",
        (limit,),
    )
    return [
        DeadLetter(
            event_id=r[0],
            subscriber_id=r[1],
            topic=r[2],
            source=r[3],
            attempt=r[4],
            error=r[5],
            created_at=r[6],
            failed_at=r[7],
        )
        for r in rows.fetchall()
    ]


def _requeue(conn: sqlite3.Connection, event_id: int, subscriber_id: str | None, now: float) -> int:
    sql = (
        "UPDATE deliveries SET status = 'pending', attempt = 0, next_at = 0, recovered = 0,"
        " updated_at = ? WHERE event_id = ? AND status = 'dead'"
    )
    params: tuple[object, ...] = (now, event_id)
    if subscriber_id is not None:
        sql += " AND subscriber_id = ?"
        params = (*params, subscriber_id)
    return conn.execute(sql, params).rowcount


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    counts = dict.fromkeys(_STATUSES, 0)
    for status, n in conn.execute("SELECT status, count(*) FROM deliveries GROUP BY status"):
        counts[status] = n
    (counts["events"],) = conn.execute("SELECT count(*) FROM events").fetchone()
    return counts
