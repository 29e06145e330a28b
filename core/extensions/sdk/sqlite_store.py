"""A SQLite file owned by one component, on the kernel's storage layer (ADR 0015, 0080).

Extensions (kv, memory, the scheduler, the HTTP API) keep small databases;
this base gives them one way to open, query and close them, and it is an
adapter over ``core.storage`` — the one way the kernel and its extensions
reach a database: the file is a ``SQLiteDatabase`` (one connection on a
thread of its own, in call order, off the event loop; WAL; created private
to its owner), so a committed change survives a crash of the process.
``core.storage`` is imported when a store is opened, so importing the
library stays cheap for a plugin host.

A transaction (``async with store.transaction()``) holds the database's one
connection until it ends. The store's own helpers called by the task inside
the block run in that transaction; other tasks' statements wait for it to
end, so none of them ever lands inside it (and is rolled back with it).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from core.runtime.errors import HearthError

if TYPE_CHECKING:
    from core.storage import Database, Executor

__all__ = ["SQLiteStore", "StoreNotOpenError", "Synchronous"]

Synchronous = Literal["OFF", "NORMAL", "FULL"]


class StoreNotOpenError(HearthError, RuntimeError):
    """A query on a store that was never opened or is already closed; names the file."""

    def __init__(self, store: str, path: Path) -> None:
        super().__init__(f"{store} {path} is not open (open() runs in initialize/start)")
        self.path = path


class _Joined:
    """The transaction a task is in; ``None`` once it has ended (a task started inside
    the block and still running afterwards then goes back to the database)."""

    def __init__(self, tx: Executor) -> None:
        self.tx: Executor | None = tx


class SQLiteStore:
    """Subclass it, set ``SCHEMA`` (idempotent DDL), and query through the helpers.

    ``open()`` creates the parent directory and applies ``SCHEMA`` (in one
    transaction); ``close()`` is safe to call twice. Statements run in
    autocommit mode; group writes that must land together with
    ``async with store.transaction():``.
    """

    SCHEMA: ClassVar[str] = ""

    def __init__(self, path: Path, *, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self.synchronous = synchronous
        self._db: Database | None = None
        self._opening = asyncio.Lock()
        self._joined: contextvars.ContextVar[_Joined | None] = contextvars.ContextVar(
            f"store:{path}", default=None
        )

    def _database(self) -> Database:
        """The database ``open`` opens: the SQLite file, in WAL mode."""
        from core.storage import SQLiteDatabase

        return SQLiteDatabase(self.path, synchronous=self.synchronous, wal=True)

    async def _prepare(self, db: Database) -> None:
        """After opening: ``SCHEMA``, in one transaction (all of it or none)."""
        if self.SCHEMA:
            async with db.transaction() as tx:
                await tx.execute_script(self.SCHEMA)

    async def open(self) -> None:
        """Connect and apply ``SCHEMA``; a second call is a no-op."""
        async with self._opening:
            if self._db is not None:
                return
            db = self._database()
            await db.open()
            try:
                await self._prepare(db)
            except BaseException:
                await db.close()
                raise
            self._db = db

    async def close(self) -> None:
        """Close the connection (and its thread); the store may be opened again."""
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def db(self) -> Database:
        """The open database (``core.storage``), or ``StoreNotOpenError`` naming this
        store's file."""
        if self._db is None:
            raise StoreNotOpenError(type(self).__name__, self.path)
        return self._db

    def _on(self) -> Executor:
        """The transaction this task is in, else the database."""
        joined = self._joined.get()
        if joined is not None and joined.tx is not None:
            return joined.tx
        return self.db

    # ------------------------------------------------------------ helpers

    async def fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of ``sql`` as a tuple."""
        return [tuple(row) for row in await self._on().fetch_all(sql, *args)]

    async def fetch_one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of ``sql``, or ``None``."""
        row = await self._on().fetch_one(sql, *args)
        return None if row is None else tuple(row)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        return await self._on().execute(sql, *args)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per row (in a transaction: together with it)."""
        await self._on().execute_many(sql, rows)

    def _returning_id(self, sql: str) -> str:
        return sql.rstrip().rstrip(";") + " RETURNING rowid"

    async def execute_insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one ``INSERT``; the new row's rowid."""
        value = await self._on().fetch_value(self._returning_id(sql), *args)
        if value is None:
            raise RuntimeError(f"{self.path}: {sql.split()[0]} produced no rowid")
        return int(value)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Self]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls back and propagates.
        Yields the store: its helpers, called by this task inside the block, run in
        the transaction (a nested ``transaction()`` joins it)."""
        joined = self._joined.get()
        if joined is not None and joined.tx is not None:
            yield self
            return
        async with self.db.transaction() as tx:
            joined = _Joined(tx)
            token = self._joined.set(joined)
            try:
                yield self
            finally:
                joined.tx = None
                self._joined.reset(token)
