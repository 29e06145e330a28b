"""A SQLite file owned by one component: one aiosqlite connection, WAL, a schema.

Extensions (kv, memory, the scheduler) and the kernel (manifest schedule
state) keep small databases; this base gives them one way to open, query and
close them. aiosqlite runs every statement on its own thread, so nothing
blocks the event loop; ``synchronous=NORMAL`` with WAL means a committed
change survives a crash of the process. aiosqlite is imported when a store
is opened, so importing the library stays cheap for a plugin host.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from core.runtime import create_private
from core.runtime.errors import HearthError

if TYPE_CHECKING:
    import aiosqlite

__all__ = ["SQLiteStore", "StoreNotOpenError", "Synchronous"]

Synchronous = Literal["OFF", "NORMAL", "FULL"]


class StoreNotOpenError(HearthError, RuntimeError):
    """A query on a store that was never opened or is already closed; names the file."""

    def __init__(self, store: str, path: Path) -> None:
        super().__init__(f"{store} {path} is not open (open() runs in initialize/start)")
        self.path = path


class SQLiteStore:
    """Subclass it, set ``SCHEMA`` (idempotent DDL), and query through the helpers.

    ``open()`` creates the parent directory and applies ``SCHEMA``; ``close()``
    is safe to call twice. Statements run in autocommit mode; group writes
    that must land together with ``async with store.transaction():``.
    """

    SCHEMA: ClassVar[str] = ""

    def __init__(self, path: Path, *, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self.synchronous = synchronous
        self._db: aiosqlite.Connection | None = None
        self._opening = asyncio.Lock()

    async def open(self) -> None:
        """Connect and apply ``SCHEMA``; a second call is a no-op."""
        import aiosqlite

        async with self._opening:
            if self._db is not None:
                return
            await asyncio.to_thread(self._create)
            db = await aiosqlite.connect(self.path, isolation_level=None)
            try:
                await db.execute("PRAGMA journal_mode = WAL")
                await db.execute(f"PRAGMA synchronous = {self.synchronous}")
                if self.SCHEMA:
                    await db.executescript(self.SCHEMA)
            except BaseException:
                await db.close()
                raise
            self._db = db

    def _create(self) -> None:
        """The parent directory, and the file private to its owner (0600; SQLite gives
        its ``-wal`` and ``-shm`` files the same mode)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        create_private(self.path)

    async def close(self) -> None:
        """Close the connection (and its thread); the store may be opened again."""
        db, self._db = self._db, None
        if db is not None:
            await db.close()

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def db(self) -> aiosqlite.Connection:
        """The open connection, or ``StoreNotOpenError`` naming this store's file."""
        if self._db is None:
            raise StoreNotOpenError(type(self).__name__, self.path)
        return self._db

    # ------------------------------------------------------------ helpers

    # One trip to the connection's thread per statement where aiosqlite has a helper
    # for it (a cursor costs three: execute, fetch, close); on a busy machine each
    # trip waits for the thread to be scheduled, and a turn makes several.

    async def fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of ``sql`` as a tuple."""
        return [tuple(row) for row in await self.db.execute_fetchall(sql, args)]

    async def fetch_one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of ``sql``, or ``None`` (for queries of one row: all are read)."""
        rows = list(await self.db.execute_fetchall(sql, args))
        return tuple(rows[0]) if rows else None

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        async with self.db.execute(sql, args) as cursor:
            return int(cursor.rowcount)

    async def execute_insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one ``INSERT``; the new row's rowid."""
        row = await self.db.execute_insert(sql, args)
        if row is None or row[0] is None:
            raise RuntimeError(f"{self.path}: {sql.split()[0]} produced no rowid")
        return int(row[0])

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls back and propagates."""
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            await db.execute("ROLLBACK")
            raise
        await db.execute("COMMIT")
