"""One way for a kernel store to talk to SQLite or PostgreSQL (ADR 0051).

A store is written once, against ``Executor``: SQL with ``?`` placeholders
(numbered ``$1``, ``$2`` … for PostgreSQL), ``fetch_all``/``fetch_one``/
``fetch_value``, ``execute`` returning the rows changed, and
``transaction()``. What the two databases share is written the same way
(``INSERT … ON CONFLICT … DO UPDATE SET c = excluded.c``, ``RETURNING``,
``CURRENT_TIMESTAMP``); what differs is named by the executor's ``dialect``
and the helpers of ``core.storage.sql`` (row locks, insertion order).

``SQLiteDatabase`` (``core.storage.sqlite``) keeps one connection to its file
on a thread of its own. ``PostgresDatabase`` uses the process's shared pool (``pool_for``);
a transaction holds one connection. Both migrate the store's components
(``core.storage.migrations``) when opened.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol

from core.runtime.errors import HearthError
from core.storage.postgres import pool_for, release_pool
from core.storage.sql import numbered

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "Database",
    "DatabaseClosedError",
    "Dialect",
    "DuplicateKeyError",
    "Executor",
    "PostgresDatabase",
    "PostgresExecutor",
    "lock_named",
]

Dialect = Literal["sqlite", "postgres"]
SCHEMA_POOL_MAX_SIZE = 4  # an extension's schema, per process: extensions' stores are small


class DatabaseClosedError(HearthError, RuntimeError):
    """A store used before ``open()`` or after ``close()``; names the store."""


class DuplicateKeyError(HearthError):
    """A statement would break a unique key (the row is there already): SQLite's
    ``IntegrityError`` and PostgreSQL's ``unique_violation``, one error for a store
    written once. The transaction it ran in is rolled back."""


class Executor(Protocol):
    """Statements on one database, in a transaction or each on its own."""

    @property
    def dialect(self) -> Dialect: ...

    async def fetch_all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None: ...

    async def fetch_value(self, sql: str, *args: Any) -> Any: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    async def write(self, sql: str, *args: Any) -> None:
        """A statement whose result nobody reads: in a SQLite transaction it goes to
        the database with the next statement that returns something, or ``COMMIT``
        (one hop for both); its error is raised then."""
        ...

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """``sql`` once per row; sent like ``write``."""
        ...

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

    async def write(self, sql: str, *args: Any) -> None:
        await self.execute(sql, *args)

    async def fetch_one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row = await self._on().fetchrow(numbered(sql), *args)
        return None if row is None else tuple(row)

    async def fetch_value(self, sql: str, *args: Any) -> Any:
        return await self._on().fetchval(numbered(sql), *args)

    async def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; the rows it changed (from the command tag)."""
        try:
            status = await self._on().execute(numbered(sql), *args)
        except Exception as exc:
            _raise_duplicate(exc)
            raise
        last = str(status).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(row) for row in rows]
        if batch:
            try:
                await self._on().executemany(numbered(sql), batch)
            except Exception as exc:
                _raise_duplicate(exc)
                raise

    async def execute_script(self, script: str) -> None:
        await self._on().execute(script)  # no arguments: several statements are allowed


class PostgresDatabase(PostgresExecutor):
    """The process's pool for ``storage.postgres_dsn`` with ``components`` migrated;
    ``what`` names the store in the error when it is used before ``open``.

    ``synchronous`` is ``events.synchronous``: with ``normal`` a transaction commits
    without waiting for the server's disk flush (``synchronous_commit = off``), as
    SQLite's ``NORMAL`` commits without an fsync — a crash of a kernel process loses
    nothing, one of the database server may lose the last fraction of a second.

    ``schema``: the statements run on the process's pool for that schema (its
    ``search_path``: an extension's own tables, ADR 0035); the components are
    migrated on the database's main pool, where ``hearth_schema`` is. The schema's
    pool holds ``SCHEMA_POOL_MAX_SIZE`` connections at most."""

    shared = True

    def __init__(
        self,
        storage: StorageSettings,
        components: Sequence[str],
        what: str,
        *,
        synchronous: str = "full",
        schema: str | None = None,
    ) -> None:
        super().__init__(None)
        self.storage = storage
        self.components = tuple(components)
        self.what = what
        self.flush = synchronous.lower() == "full"
        self.schema = schema
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
            dsn, sizes = storage.postgres_dsn or "", (storage.pool_min_size, storage.pool_max_size)
            pool = await pool_for(dsn, min_size=sizes[0], max_size=sizes[1])
            try:
                await apply_migrations(PostgresExecutor(pool), self.components)
                if self.schema is not None:  # migrated: now the schema's own pool
                    await release_pool(pool)
                    pool = None
                    pool = await pool_for(
                        dsn,
                        min_size=min(sizes[0], SCHEMA_POOL_MAX_SIZE),
                        max_size=min(sizes[1], SCHEMA_POOL_MAX_SIZE),
                        schema=self.schema,
                    )
            except BaseException:
                if pool is not None:
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


def _raise_duplicate(exc: Exception) -> None:
    """asyncpg's ``UniqueViolationError`` (SQLSTATE 23505) as ``DuplicateKeyError``
    (read off the error: asyncpg is imported only where a pool opens)."""
    if getattr(exc, "sqlstate", None) == "23505":
        raise DuplicateKeyError(str(exc)) from exc


async def lock_named(tx: Executor, name: str) -> None:
    """Serialise the transactions that take ``name`` until ``tx`` ends: PostgreSQL's
    transaction-scoped advisory lock; nothing on SQLite, whose ``BEGIN IMMEDIATE``
    already holds the whole file."""
    if tx.dialect == "postgres":
        await tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", name)
