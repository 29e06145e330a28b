"""One way for a kernel store to talk to SQLite or PostgreSQL (ADR 0051).

A store is written once, against ``Executor``: SQL with ``?`` placeholders
(numbered ``$1``, ``$2`` … for PostgreSQL), ``fetch_all``/``fetch_one``/
``fetch_value``, ``execute`` returning the rows changed, and
``transaction()``. What the two databases share is written the same way
(``INSERT … ON CONFLICT … DO UPDATE SET c = excluded.c``, ``RETURNING``,
``CURRENT_TIMESTAMP``); what differs is named by the executor's ``dialect``
and the helpers of ``core.storage.sql`` (row locks, insertion order).

``SQLiteDatabase`` keeps one connection to its file on a thread of its own:
every statement runs there in order, so a cancelled caller never leaves a
statement running beside the next. Its transactions are ``BEGIN IMMEDIATE``
(the file's write lock, across processes too) and one at a time within the
process. ``PostgresDatabase`` uses the process's shared pool (``pool_for``);
a transaction holds one connection. Both migrate the store's components
(``core.storage.migrations``) when opened.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from core.runtime.errors import HearthError
from core.storage.postgres import pool_for, release_pool
from core.storage.sql import numbered, statements

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "Database",
    "DatabaseClosedError",
    "Dialect",
    "Executor",
    "PostgresDatabase",
    "PostgresExecutor",
    "SQLiteDatabase",
    "lock_named",
]

Dialect = Literal["sqlite", "postgres"]
T = TypeVar("T")
BUSY_TIMEOUT_S = 30.0


class DatabaseClosedError(HearthError, RuntimeError):
    """A store used before ``open()`` or after ``close()``; names the store."""


class Executor(Protocol):
    """Statements on one database, in a transaction or each on its own."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetch_all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None: ...

    async def fetch_value(self, sql: str, *args: Any) -> Any: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    async def execute_script(self, script: str) -> None: ...


class Database(Executor, Protocol):
    """A store's database: an ``Executor`` that also opens, closes and begins
    transactions. ``shared``: other kernel processes write it too (PostgreSQL), so
    nothing read may be cached for long."""

    @property
    def shared(self) -> bool: ...

    @property
    def is_open(self) -> bool: ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[Executor]: ...


# ---------------------------------------------------------------- SQLite


class _SQLiteStatements:
    """The statements of ``Executor`` on one sqlite3 connection, run on ``run``'s thread."""

    dialect: Dialect = "sqlite"

    def __init__(self, run: Callable[[Callable[[sqlite3.Connection], Any]], Any]) -> None:
        self._run = run

    async def fetch_all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = await self._run(lambda c: c.execute(sql, args).fetchall())
        return rows

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = await self._run(lambda c: c.execute(sql, args).fetchone())
        return row

    async def fetch_value(self, sql: str, *args: Any) -> Any:
        row = await self.fetch_one(sql, *args)
        return None if row is None else row[0]

    async def execute(self, sql: str, *args: Any) -> int:
        count: int = await self._run(lambda c: c.execute(sql, args).rowcount)
        return count

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        await self._run(lambda c: c.executemany(sql, batch))

    async def execute_script(self, script: str) -> None:
        """Each statement of ``script`` (not ``executescript``, which would commit the
        transaction it runs in)."""

        def run(conn: sqlite3.Connection) -> None:
            for statement in statements(script):
                conn.execute(statement)

        await self._run(run)


class SQLiteDatabase(_SQLiteStatements):
    """One SQLite file (``sessions.db``, ``state.db``) with ``components`` migrated."""

    shared = False

    def __init__(
        self,
        path: Path,
        components: Sequence[str] = (),
        *,
        synchronous: str = "normal",
        wal: bool = False,
    ) -> None:
        super().__init__(self._locked)
        self.path = path
        self.components = tuple(components)
        self.synchronous = "FULL" if synchronous.lower() == "full" else "NORMAL"
        self.wal = wal
        self._conn: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
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
            self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"sqlite:{self.path.name}")
            try:
                self._conn = await self._on_thread(self._connect)
                await apply_migrations(self, self.components)
            except BaseException:
                await self.close()
                raise
            self._migrated = True

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        if self.wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return conn

    async def close(self) -> None:
        """Close the connection and its thread; the database may be opened again."""
        async with self._lock:
            conn, thread = self._conn, self._thread
            self._conn = self._thread = None
            self._migrated = False
            if thread is None:
                return
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(thread, conn.close)
            thread.shutdown(wait=False)

    async def _on_thread(self, fn: Callable[[], T]) -> T:
        if self._thread is None:
            raise DatabaseClosedError(f"{self.path} is not open (open() at start)")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    async def _direct(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise DatabaseClosedError(f"{self.path} is not open (open() at start)")
        return await self._on_thread(lambda: fn(conn))

    async def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        async with self._lock:
            return await self._direct(fn)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; an exception (a cancellation too) rolls back.
        ``BEGIN`` goes to the thread with the first statement (one hop less per
        transaction); a transaction that ran nothing commits nothing."""
        began = False

        async def run(fn: Callable[[sqlite3.Connection], T]) -> T:
            nonlocal began
            if began:
                return await self._direct(fn)

            def first(conn: sqlite3.Connection) -> T:
                conn.execute("BEGIN IMMEDIATE")
                return fn(conn)

            began = True
            return await self._direct(first)

        async with self._lock:
            try:
                yield _SQLiteStatements(run)
            except BaseException:
                if began:
                    await self._direct(_rollback)
                raise
            if began:
                await self._direct(lambda c: c.execute("COMMIT"))


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:  # BEGIN itself may have failed (the file stayed locked)
        conn.execute("ROLLBACK")


# ---------------------------------------------------------------- PostgreSQL


class PostgresExecutor:
    """The statements of ``Executor`` on an asyncpg pool or connection."""

    dialect: Dialect = "postgres"

    def __init__(self, target: Any) -> None:
        self.target = target

    def _on(self) -> Any:
        return self.target

    async def fetch_all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await self._on().fetch(numbered(sql), *args)]

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row = await self._on().fetchrow(numbered(sql), *args)
        return None if row is None else tuple(row)

    async def fetch_value(self, sql: str, *args: Any) -> Any:
        return await self._on().fetchval(numbered(sql), *args)

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; the rows it changed (from the command tag)."""
        status = await self._on().execute(numbered(sql), *args)
        last = str(status).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        if batch:
            await self._on().executemany(numbered(sql), batch)

    async def execute_script(self, script: str) -> None:
        await self._on().execute(script)  # no arguments: several statements are allowed


class PostgresDatabase(PostgresExecutor):
    """The process's pool for ``storage.postgres_dsn`` with ``components`` migrated;
    ``what`` names the store in the error when it is used before ``open``.

    ``synchronous`` is ``events.synchronous``: with ``normal`` a transaction commits
    without waiting for the server's disk flush (``synchronous_commit = off``), as
    SQLite's ``NORMAL`` commits without an fsync — a crash of a kernel process loses
    nothing, one of the database server may lose the last fraction of a second."""

    shared = True

    def __init__(
        self,
        storage: StorageSettings,
        components: Sequence[str],
        what: str,
        *,
        synchronous: str = "full",
    ) -> None:
        super().__init__(None)
        self.storage = storage
        self.components = tuple(components)
        self.what = what
        self.flush = synchronous.lower() == "full"
        self._opening = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        return self.target is not None

    @property
    def pool(self) -> Any:
        """The open ``asyncpg.Pool`` (``DatabaseClosedError`` before ``open``)."""
        if self.target is None:
            raise DatabaseClosedError(f"{self.what} not open (open() at start)")
        return self.target

    async def open(self) -> None:
        """Take the process's pool and migrate (once; concurrent callers wait)."""
        from core.storage.migrations import apply_migrations

        async with self._opening:
            if self.target is not None:
                return
            storage = self.storage
            pool = await pool_for(
                storage.postgres_dsn or "",
                min_size=storage.pool_min_size,
                max_size=storage.pool_max_size,
            )
            try:
                await apply_migrations(PostgresExecutor(pool), self.components)
            except BaseException:
                await release_pool(pool)
                raise
            self.target = pool

    async def close(self) -> None:
        """Give the pool back (the last holder in the process closes it)."""
        pool, self.target = self.target, None
        if pool is not None:
            await release_pool(pool)

    def _on(self) -> Any:
        return self.pool

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        """One transaction on one of the pool's connections."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not self.flush:
                await conn.execute("SET LOCAL synchronous_commit = off")
            yield PostgresExecutor(conn)


async def lock_named(tx: Executor, name: str) -> None:
    """Serialise the transactions that take ``name`` until ``tx`` ends: PostgreSQL's
    transaction-scoped advisory lock; nothing on SQLite, whose ``BEGIN IMMEDIATE``
    already holds the whole file."""
    if tx.dialect == "postgres":
        await tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", name)
