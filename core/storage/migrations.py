"""The one migration runner: versioned schemas per component, on either database.

Each component ("sessions", "state", "journal", "schedules", an extension's
store …) registers its ordered migrations once, at import, for each database
it lives in (``register_migrations(name, postgres=…, sqlite=…)``); version N
is the N-th entry and is never edited after release — a change is a new
entry. A migration is SQL (one or more statements) or an async function of
the open transaction, for what SQL alone cannot say (add a column only where
it is missing). The table ``hearth_schema`` holds (component, version,
applied_at) in every database. ``apply_migrations`` runs the missing ones in
one transaction per component under a lock — PostgreSQL's transaction-scoped
advisory lock, SQLite's ``BEGIN IMMEDIATE`` (the file's write lock) — so
several processes starting at once apply each migration exactly once and the
others wait, then find nothing to do (ADR 0034, 0051).

A database written before this runner existed is upgraded in place: a
component's first SQLite migration creates its tables only ``IF NOT EXISTS``
and the later ones check before they change, so the tables and rows the old
code made are kept and only what is missing is added.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.storage.database import Dialect, Executor, PostgresExecutor
from core.storage.postgres import StorageError, pool_for, release_pool
from core.storage.sqlite import SQLiteDatabase

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "SCHEMA_TABLE",
    "Migration",
    "SchemaStatus",
    "apply_migrations",
    "known_components",
    "migrated_pool",
    "register_migrations",
    "schema_status",
]

SCHEMA_TABLE = "hearth_schema"
# pg_advisory_xact_lock key: the same number in every Hearth process
_LOCK_KEY = zlib.crc32(b"hearth_schema migrations")

Migration = str | Callable[[Executor], Awaitable[None]]

_CREATE_SCHEMA_TABLE: dict[Dialect, str] = {
    "postgres": f"""
CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    component  text PRIMARY KEY,
    version    integer NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)""",
    "sqlite": f"""
CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    component  TEXT PRIMARY KEY,
    version    INTEGER NOT NULL,
    applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
)""",
}

_registry: dict[Dialect, dict[str, tuple[Migration, ...]]] = {"postgres": {}, "sqlite": {}}


def register_migrations(
    component: str, postgres: Sequence[Migration] = (), *, sqlite: Sequence[Migration] = ()
) -> None:
    """Declare ``component``'s migrations per database (version N = the N-th entry).

    Registering again with the same lists is harmless (a module imported twice);
    different lists for the same component are a programming error.
    """
    if not postgres and not sqlite:
        raise ValueError(f"component {component!r}: needs at least one migration")
    for dialect, migrations in (("postgres", postgres), ("sqlite", sqlite)):
        if not migrations:
            continue
        new = tuple(migrations)
        old = _registry[dialect].setdefault(component, new)  # type: ignore[index]
        if old != new:
            raise ValueError(
                f"component {component!r}: {dialect} migrations registered twice, differently"
            )


def known_components(dialect: Dialect = "postgres") -> dict[str, int]:
    """Registered components and the schema version this code expects for each."""
    return {name: len(steps) for name, steps in sorted(_registry[dialect].items())}


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """One component's schema: what the database has, what this code expects."""

    component: str
    applied: int  # 0: none yet
    expected: int  # 0: this code does not know the component

    @property
    def current(self) -> bool:
        return self.applied == self.expected


async def apply_migrations(
    db: Any,
    components: Iterable[str] | None = None,
    *,
    registry: Mapping[str, Sequence[Migration]] | None = None,
) -> dict[str, int]:
    """Bring ``components`` (default: every one registered for ``db``'s database) to
    their newest version.

    ``db``: a ``SQLiteDatabase``, a ``PostgresExecutor`` (or ``PostgresDatabase``)
    over a pool, or an asyncpg pool. ``registry`` replaces the registered
    migrations (tests of the runner itself). Returns component -> version now
    applied. ``StorageError`` when the database is ahead of this code (a newer
    Hearth migrated it) or a migration fails; a failed migration leaves its
    component at the previous version.
    """
    dialect: Dialect = "sqlite" if isinstance(db, SQLiteDatabase) else "postgres"
    known = _registry[dialect] if registry is None else registry
    names = sorted(known if components is None else components)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no {dialect} migrations registered for {', '.join(unknown)}")
    where = str(db.path) if isinstance(db, SQLiteDatabase) else SCHEMA_TABLE
    versions: dict[str, int] = {}
    for name in names:
        async with _transaction(db) as tx:
            versions[name] = await _migrate(tx, where, name, tuple(known[name]))
    return versions


@asynccontextmanager
async def _transaction(db: Any) -> AsyncIterator[Executor]:
    if isinstance(db, SQLiteDatabase):
        async with db.transaction() as tx:  # BEGIN IMMEDIATE: the file's write lock
            yield tx
        return
    pool = db.target if isinstance(db, PostgresExecutor) else db
    async with pool.acquire() as conn, conn.transaction():
        tx = PostgresExecutor(conn)
        await tx.execute("SELECT pg_advisory_xact_lock(?)", _LOCK_KEY)
        yield tx


async def _migrate(
    tx: Executor, where: str, component: str, migrations: tuple[Migration, ...]
) -> int:
    await tx.execute_script(_CREATE_SCHEMA_TABLE[tx.dialect])
    value = await tx.fetch_value(
        f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", component
    )
    applied = 0 if value is None else int(value)
    if applied > len(migrations):
        raise StorageError(
            f"{where}: component {component!r} is at version {applied}, but this "
            f"Hearth knows only up to {len(migrations)}: run a Hearth at least as new as "
            "the one that migrated the database"
        )
    for version in range(applied + 1, len(migrations) + 1):
        step = migrations[version - 1]
        try:
            if isinstance(step, str):
                await tx.execute_script(step)
            else:
                await step(tx)
        except Exception as exc:
            raise StorageError(f"{where}: migration {component} {version} failed: {exc}") from exc
    if len(migrations) > applied:
        await tx.execute(
            f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES (?, ?)"
            " ON CONFLICT (component) DO UPDATE SET version = excluded.version,"
            " applied_at = CURRENT_TIMESTAMP",
            component,
            len(migrations),
        )
    return len(migrations)


async def migrated_pool(storage: StorageSettings, components: Iterable[str]) -> Any:
    """The process's pool (``pool_for``, sized by ``storage``) with ``components``
    migrated. Released again if migrating fails; otherwise the caller gives it back
    with ``release_pool``."""
    pool = await pool_for(
        storage.postgres_dsn or "", min_size=storage.pool_min_size, max_size=storage.pool_max_size
    )
    try:
        await apply_migrations(pool, components)
    except BaseException:
        await release_pool(pool)
        raise
    return pool


async def schema_status(pool: Any) -> list[SchemaStatus]:
    """Every PostgreSQL component the database or this code knows, with both versions
    (``doctor``)."""
    async with pool.acquire() as conn:
        exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", SCHEMA_TABLE)
        rows = await conn.fetch(f"SELECT component, version FROM {SCHEMA_TABLE}") if exists else []
    applied = {str(row["component"]): int(row["version"]) for row in rows}
    expected = known_components()
    return [
        SchemaStatus(name, applied.get(name, 0), expected.get(name, 0))
        for name in sorted(set(applied) | set(expected))
    ]
