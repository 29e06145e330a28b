"""A store on whichever backend the kernel gives the extension (ADR 0035).

``Store`` is a ``SQLiteStore`` that can also live in PostgreSQL: a subclass
declares ``SCHEMA`` (SQLite DDL) and ``POSTGRES_SCHEMA`` (PostgreSQL
migrations, version N = the N-th entry, never edited once released), and is
made with ``Store.at(context.storage, FILE)``. With SQLite it is exactly a
``SQLiteStore`` on ``<data_dir>/FILE``; with PostgreSQL the same helpers
(``fetch_all``, ``fetch_one``, ``execute``, ``execute_insert``,
``transaction``) run against the extension's own schema, ``?`` placeholders
included. Where the two dialects differ a store branches on ``dialect``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from core.extensions.sdk.postgres_store import PostgresStore
from core.extensions.sdk.sqlite_store import SQLiteStore, Synchronous

if TYPE_CHECKING:
    from core.extensions.contract import StoreLocation

__all__ = ["Dialect", "PostgresTarget", "Store"]

Dialect = Literal["sqlite", "postgres"]


class PostgresTarget:
    """The database and the owner (extension id) of a store kept in PostgreSQL."""

    def __init__(self, dsn: str, extension_id: str) -> None:
        self.dsn = dsn
        self.extension_id = extension_id


class Store(SQLiteStore):
    """Subclass it, set ``SCHEMA`` and ``POSTGRES_SCHEMA``, make it with ``at``."""

    POSTGRES_SCHEMA: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "NORMAL",
        postgres: PostgresTarget | None = None,
    ) -> None:
        super().__init__(path, synchronous=synchronous)
        self._postgres: PostgresStore | None = None
        if postgres is not None:
            component = f"ext:{postgres.extension_id}:{path.stem}"
            self._postgres = PostgresStore(
                postgres.dsn, postgres.extension_id, component, self.POSTGRES_SCHEMA
            )

    @classmethod
    def at(cls, location: StoreLocation, file: str, **options: Any) -> Self:
        """The store for ``location``: ``<data_dir>/file``, or the extension's schema
        in PostgreSQL (``file``'s stem names the store's migrations there)."""
        postgres = None
        if location.backend == "postgres" and location.postgres_dsn:
            postgres = PostgresTarget(location.postgres_dsn, location.extension_id)
        return cls(location.data_dir / file, postgres=postgres, **options)

    @property
    def dialect(self) -> Dialect:
        return "sqlite" if self._postgres is None else "postgres"

    async def open(self) -> None:
        if self._postgres is None:
            await super().open()
        else:
            await self._postgres.open()

    async def close(self) -> None:
        if self._postgres is None:
            await super().close()
        else:
            await self._postgres.close()

    @property
    def is_open(self) -> bool:
        return super().is_open if self._postgres is None else self._postgres.is_open

    async def fetch_all(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._postgres is None:
            return await super().fetch_all(sql, args)
        return await self._postgres.fetch_all(sql, args)

    async def fetch_one(self, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        if self._postgres is None:
            return await super().fetch_one(sql, args)
        return await self._postgres.fetch_one(sql, args)

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        if self._postgres is None:
            return await super().execute(sql, args)
        return await self._postgres.execute(sql, args)

    async def execute_insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Run one ``INSERT``; the new row's id (PostgreSQL: the key column must be ``id``)."""
        if self._postgres is None:
            return await super().execute_insert(sql, args)
        return await self._postgres.execute_insert(sql, args)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """Statements of this task inside the block commit together or not at all."""
        if self._postgres is None:
            async with super().transaction() as db:
                yield db
        else:
            async with self._postgres.transaction() as conn:
                yield conn
