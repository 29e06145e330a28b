"""A store on whichever backend the kernel gives the extension (ADR 0035, 0080).

``Store`` is a ``SQLiteStore`` that can also live in PostgreSQL: a subclass
declares ``SCHEMA`` (SQLite DDL) and ``POSTGRES_SCHEMA`` (PostgreSQL
migrations, version N = the N-th entry, never edited once released), and is
made with ``Store.at(context.storage, FILE)``. With SQLite it is exactly a
``SQLiteStore`` on ``<data_dir>/FILE``; with PostgreSQL the same helpers
(``fetch_all``, ``fetch_one``, ``execute``, ``execute_many``,
``execute_insert``, ``transaction``) run against the extension's own schema,
``?`` placeholders included. Where the two dialects differ a store branches on
``dialect``.

On PostgreSQL the store is a ``core.storage.PostgresDatabase``: its tables are
in the schema ``ext_<extension id>``, reached through the process's pool for
that schema (whose connections have it as their ``search_path``, so the
extension writes the same unqualified SQL as on SQLite); its migrations are
the kernel's one runner's (component ``ext:<id>:<store>``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from core.extensions.sdk.sqlite_store import SQLiteStore, Synchronous

if TYPE_CHECKING:
    from core.extensions.contract import StoreLocation
    from core.storage import Database

__all__ = ["Dialect", "PostgresTarget", "Store", "schema_name"]

Dialect = Literal["sqlite", "postgres"]


def schema_name(extension_id: str) -> str:
    """The PostgreSQL schema of an extension's tables: ``ext_`` and its id, lowercase,
    anything but letters, digits and ``_`` as ``_``."""
    return "ext_" + re.sub(r"[^a-z0-9_]", "_", extension_id.lower())


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
        self.postgres = postgres
        self.component = ""
        if postgres is not None:
            self.component = f"ext:{postgres.extension_id}:{path.stem}"
            if not self.POSTGRES_SCHEMA:
                raise ValueError(
                    f"store {self.component}: storage.backend is postgres but the store "
                    "declares no POSTGRES_SCHEMA"
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
        return "sqlite" if self.postgres is None else "postgres"

    def _database(self) -> Database:
        """The SQLite file, or the extension's schema in PostgreSQL with this store's
        migrations registered for the kernel's runner."""
        if self.postgres is None:
            return super()._database()
        from core.config import StorageSettings
        from core.storage import PostgresDatabase, StorageError, register_migrations

        schema = schema_name(self.postgres.extension_id)
        prefix = (
            f'CREATE SCHEMA IF NOT EXISTS "{schema}";'
            f' SET LOCAL search_path TO "{schema}", public;\n'
        )
        try:
            register_migrations(self.component, [prefix + sql for sql in self.POSTGRES_SCHEMA])
        except ValueError:
            raise StorageError(
                f"store {self.component}: its POSTGRES_SCHEMA changed since this process "
                "first opened it (a reload); restart the kernel to apply the new migration"
            ) from None
        storage = StorageSettings(backend="postgres", postgres_dsn=self.postgres.dsn)
        what = f"store {self.component} (PostgreSQL) is"
        return PostgresDatabase(storage, [self.component], what, schema=schema)

    async def _prepare(self, db: Database) -> None:
        if self.postgres is None:  # PostgreSQL: the migrations ran at open
            await super()._prepare(db)

    def _returning_id(self, sql: str) -> str:
        """PostgreSQL: the key column must be ``id``."""
        if self.postgres is None:
            return super()._returning_id(sql)
        return sql.rstrip().rstrip(";") + " RETURNING id"
