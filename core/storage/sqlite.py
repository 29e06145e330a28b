"""SQLite behind ``Executor`` (ADR 0051, 0062): one connection on a thread of its own.

Every statement runs on the connection's thread in the order sent, so a
cancelled caller never leaves a statement running beside the next.
Transactions are ``BEGIN IMMEDIATE`` (the file's write lock, across processes
too), one at a time within the process. A hop to the thread costs more than
most statements (~0.06–0.1 ms on a loaded machine against ~0.01–0.05 ms for a
small write in WAL mode), so a transaction sends its statements in as few hops
as it can: ``BEGIN`` and the writes whose result nobody reads (``write``,
``execute_many``) travel with the next statement that returns something, or
with ``COMMIT`` (ADR 0062).
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any, TypeVar

from core.runtime import create_private
from core.storage.database import DatabaseClosedError, Dialect, DuplicateKeyError, Executor
from core.storage.sql import statements

__all__ = ["SQLiteDatabase", "sqlite_read_only"]

T = TypeVar("T")
BUSY_TIMEOUT_S = 30.0
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL")

Job = Callable[[sqlite3.Connection], Any]


class _Worker:
    """The thread that owns a SQLite connection: jobs run there one after another, in
    the order sent. One hop is a queue put and a ``call_soon_threadsafe`` back — about
    a third cheaper than ``run_in_executor`` (no executor future to wrap)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[], Any]] | None
        ] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn = job
            try:
                result, error = fn(), None
            except BaseException as exc:  # handed to the waiting coroutine
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(_settle, future, result, error)
            except RuntimeError:  # the loop closed while the job ran: nobody waits
                pass

    async def run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((loop, future, fn))
        return await future

    def stop(self) -> None:
        """The thread ends after the jobs already sent."""
        self._jobs.put(None)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def _guarded(fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
    """``fn`` raising ``DuplicateKeyError`` for a broken unique key, as on PostgreSQL."""

    def run(conn: sqlite3.Connection) -> T:
        try:
            return fn(conn)
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
                raise DuplicateKeyError(str(exc)) from exc
            raise

    return run


class _SQLiteStatements:
    """The statements of ``Executor`` on one sqlite3 connection: ``_now`` runs a job on
    the connection's thread and returns its result; ``_later`` is for the statements
    whose result nobody reads (``write``, ``execute_many``) — at once outside a
    transaction, with the transaction's next hop inside one."""

    dialect: Dialect = "sqlite"

    async def _now(self, fn: Job) -> Any:
        raise NotImplementedError

    async def _later(self, fn: Job) -> None:
        await self._now(fn)

    async def fetch_all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = await self._now(lambda c: c.execute(sql, args).fetchall())
        return rows

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = await self._now(lambda c: c.execute(sql, args).fetchone())
        return row

    async def fetch_value(self, sql: str, *args: Any) -> Any:
        row = await self.fetch_one(sql, *args)
        return None if row is None else row[0]

    async def execute(self, sql: str, *args: Any) -> int:
        count: int = await self._now(lambda c: c.execute(sql, args).rowcount)
        return count

    async def write(self, sql: str, *args: Any) -> None:
        await self._later(lambda c: c.execute(sql, args))

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        if batch:
            await self._later(lambda c: c.executemany(sql, batch))

    async def execute_script(self, script: str) -> None:
        """Each statement of ``script`` (not ``executescript``, which would commit the
        transaction it runs in), at once: a migration's error belongs to its step."""
        parts = statements(script)

        def run(conn: sqlite3.Connection) -> None:
            for statement in parts:
                conn.execute(statement)

        await self._now(run)


class _SQLiteTransaction(_SQLiteStatements):
    """One ``BEGIN IMMEDIATE`` … ``COMMIT`` on the database's thread, in as few hops as
    its statements allow: ``BEGIN`` and the writes waiting (``_later``) go with the
    next statement whose result is read, and the last writes with ``COMMIT``. So a
    transaction that reads once and then writes is two hops; one that only writes,
    one. A write's error (a broken key) is raised by that hop, at the latest when the
    ``async with`` block ends, and rolls everything back."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db
        self._pending: list[Job] = []
        self.began = False

    async def _later(self, fn: Job) -> None:
        self._pending.append(fn)

    def _take(self) -> list[Job]:
        jobs = self._pending if self.began else [_begin, *self._pending]
        self._pending = []
        self.began = True
        return jobs

    async def _now(self, fn: Job) -> Any:
        jobs = self._take()

        def run(conn: sqlite3.Connection) -> Any:
            for job in jobs:
                job(conn)
            return fn(conn)

        return await self._db.on_connection(run)

    async def commit(self) -> None:
        if not self.began and not self._pending:
            return  # ran nothing, commits nothing
        jobs = self._take()

        def run(conn: sqlite3.Connection) -> None:
            try:
                for job in jobs:
                    job(conn)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise

        await self._db.on_connection(run)

    async def rollback(self) -> None:
        self._pending = []
        if self.began:
            await self._db.on_connection(_rollback)


class SQLiteDatabase(_SQLiteStatements):
    """One SQLite file (``sessions.db``, ``state.db``, an extension's store) with
    ``components`` migrated; created private to its owner (0600, ADR 0048: SQLite
    gives its ``-wal`` and ``-shm`` files the same mode). ``synchronous``: ``full``,
    ``normal`` or ``off`` (SQLite's ``PRAGMA synchronous``)."""

    shared = False

    def __init__(
        self,
        path: Path,
        components: Sequence[str] = (),
        *,
        synchronous: str = "normal",
        wal: bool = False,
    ) -> None:
        self.path = path
        self.components = tuple(components)
        self.synchronous = synchronous.upper() if synchronous.upper() in _SYNCHRONOUS else "NORMAL"
        self.wal = wal
        self._conn: sqlite3.Connection | None = None
        self._worker: _Worker | None = None
        self._lock = asyncio.Lock()  # one transaction (or statement) at a time
        self._opening = asyncio.Lock()
        self._migrated = False

    @property
    def is_open(self) -> bool:
        """Connected and migrated."""
        return self._migrated

    async def open(self) -> None:
        """Connect and migrate (once; concurrent callers wait for both, a later call
        does nothing)."""
        from core.storage.migrations import apply_migrations

        async with self._opening:
            if self._migrated:
                return
            self._worker = _Worker(f"sqlite:{self.path.name}")
            try:
                self._conn = await self._worker.run(self._connect)
                await apply_migrations(self, self.components)
            except BaseException:
                await self.close()
                raise
            self._migrated = True

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        create_private(self.path)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        if self.wal:
            _use_wal(conn)
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn

    async def close(self) -> None:
        """Close the connection and its thread; the database may be opened again."""
        async with self._lock:
            conn, worker = self._conn, self._worker
            self._conn = self._worker = None
            self._migrated = False
            if worker is None:
                return
            if conn is not None:
                await worker.run(conn.close)
            worker.stop()

    async def on_connection(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` on the connection's thread (one hop), a broken unique key
        raised as ``DuplicateKeyError``; the caller holds the database's turn (a
        transaction, or ``_now``'s lock)."""
        conn, worker = self._conn, self._worker
        if conn is None or worker is None:
            raise DatabaseClosedError(f"{self.path} is not open (open() at start)")
        guarded = _guarded(fn)
        return await worker.run(lambda: guarded(conn))

    async def _now(self, fn: Job) -> Any:
        async with self._lock:
            return await self.on_connection(fn)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``_SQLiteTransaction``: hops shared by its
        statements); an exception (a cancellation too) rolls back."""
        async with self._lock:
            tx = _SQLiteTransaction(self)
            try:
                yield tx
            except BaseException:
                await tx.rollback()
                raise
            await tx.commit()


def _begin(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # BEGIN itself may have failed (the file stayed locked)
        conn.execute("ROLLBACK")


def _use_wal(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode (it stays so in the file). Switching needs the
    database to itself, and SQLite answers ``database is locked`` at once rather than
    through the busy timeout when another connection (another store on the same file,
    starting at the same moment) holds it: so the switch is skipped when the file is
    already in WAL mode, and retried until ``BUSY_TIMEOUT_S`` when it is busy."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # on the database's own thread: the loop is not held


def sqlite_read_only(path: Path) -> closing[sqlite3.Connection]:
    """A read-only connection to the SQLite file ``path`` (it must exist), for a
    command that reads a data directory a running kernel may be writing
    (``main.py replay``): it never creates, migrates or locks for writing. A blocking
    connection: use it on a worker thread (``asyncio.to_thread``)."""
    return closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S))
