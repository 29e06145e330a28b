"""An extension's tables in the kernel's PostgreSQL database, in a schema of its own.

``Store`` uses this when ``context.storage`` says ``postgres`` (ADR 0035).
The extension's tables live in the schema ``ext_<extension id>``: its
connections (a small pool of its own) have that schema as their
``search_path``, so the extension writes the same unqualified SQL as on
SQLite, with ``?`` placeholders (numbered here). Migrations are versioned
per store through the kernel's runner (component ``ext:<id>:<store>``).
asyncpg is imported when a store opens, so importing the library stays cheap.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["PostgresStore", "numbered", "schema_name"]

POOL_MAX_SIZE = 4  # per store and process: extensions' stores are small
_QUOTED_OR_MARK = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?")


def numbered(sql: str) -> str:
    """``sql`` with each ``?`` placeholder (outside quotes) as ``$1``, ``$2`` …"""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) != "?":
            return match.group(0)
        count += 1
        return f"${count}"

    return _QUOTED_OR_MARK.sub(swap, sql)


def schema_name(extension_id: str) -> str:
    """The PostgreSQL schema of an extension's tables: ``ext_`` and its id, lowercase,
    anything but letters, digits and ``_`` as ``_``."""
    return "ext_" + re.sub(r"[^a-z0-9_]", "_", extension_id.lower())


class PostgresStore:
    """Helpers with the semantics of ``SQLiteStore``'s over an asyncpg pool."""

    def __init__(
        self, dsn: str, extension_id: str, component: str, migrations: Sequence[str]
    ) -> None:
        if not migrations:
            raise ValueError(
                f"store {component}: storage.backend is postgres but the store declares no "
                "POSTGRES_SCHEMA"
            )
        self.dsn = dsn
        self.schema = schema_name(extension_id)
        self.component = component
        self.migrations = tuple(migrations)
        self._pool: Any = None
        self._tx: contextvars.ContextVar[Any] = contextvars.ContextVar(f"tx:{component}")

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    async def open(self) -> None:
        """Migrate this store's schema, then open its pool; a second call is a no-op."""
        if self._pool is not None:
            return
        import asyncpg

        from core.storage import (
            StorageError,
            apply_migrations,
            hide_dsn_secrets,
            pool_for,
            redact_dsn,
            register_migrations,
            release_pool,
        )

        prefix = (
            f'CREATE SCHEMA IF NOT EXISTS "{self.schema}";'
            f' SET LOCAL search_path TO "{self.schema}", public;\n'
        )
        try:
            register_migrations(self.component, [prefix + sql for sql in self.migrations])
        except ValueError:
            raise StorageError(
                f"store {self.component}: its POSTGRES_SCHEMA changed since this process "
                "first opened it (a reload); restart the kernel to apply the new migration"
            ) from None
        shared = await pool_for(self.dsn)
        try:
            await apply_migrations(shared, [self.component])
        finally:
            await release_pool(shared)
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn,
                min_size=1,
                max_size=POOL_MAX_SIZE,
                server_settings={"search_path": self.schema},
            )
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            reason = hide_dsn_secrets(str(exc), self.dsn)
            raise StorageError(
                f"store {self.component}: {redact_dsn(self.dsn)}: cannot connect: {reason}"
            ) from exc

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _target(self) -> Any:
        """The connection of the transaction this task is in, else the pool."""
        conn = self._tx.get(None)
        if conn is not None:
            return conn
        if self._pool is None:
            raise RuntimeError(f"store {self.component} (PostgreSQL) is not open")
        return self._pool

    async def fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await self._target().fetch(numbered(sql), *args)]

    async def fetch_one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = await self._target().fetchrow(numbered(sql), *args)
        return None if row is None else tuple(row)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed (from the command tag)."""
        status = await self._target().execute(numbered(sql), *args)
        last = str(status).rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def execute_insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one ``INSERT``; the new row's ``id`` (the table's key must be ``id``)."""
        value = await self._target().fetchval(numbered(sql) + " RETURNING id", *args)
        if value is None:
            raise RuntimeError(f"store {self.component}: {sql.split()[0]} returned no id")
        return int(value)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """One transaction; this task's statements inside it run on its connection."""
        if self._pool is None:
            raise RuntimeError(f"store {self.component} (PostgreSQL) is not open")
        async with self._pool.acquire() as conn, conn.transaction():
            token = self._tx.set(conn)
            try:
                yield conn
            finally:
                self._tx.reset(token)
