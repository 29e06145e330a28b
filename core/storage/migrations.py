"""Versioned schema migrations per component, applied at start (ADR 0034).

Each component ("journal", "sessions", "state", "schedules", ...) registers
its ordered list of SQL migrations once, at import; version N is the N-th
entry and is never edited after release — a change is a new entry. The table
``hearth_schema`` holds (component, version, applied_at). ``apply_migrations``
runs the missing ones in one transaction per component under a
transaction-scoped advisory lock, so several processes starting at once apply
each migration exactly once and the others wait, then find nothing to do.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.storage.postgres import StorageError, pool_for, release_pool

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "SCHEMA_TABLE",
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

_CREATE_SCHEMA_TABLE = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (
    component  text PRIMARY KEY,
    version    integer NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""

_registry: dict[str, tuple[str, ...]] = {}


def register_migrations(component: str, migrations: Sequence[str]) -> None:
    """Declare ``component``'s migrations (version N = ``migrations[N-1]``).

    Registering again with the same list is harmless (a module imported twice);
    a different list for the same component is a programming error.
    """
    if not migrations:
        raise ValueError(f"component {component!r}: needs at least one migration")
    new = tuple(migrations)
    old = _registry.setdefault(component, new)
    if old != new:
        raise ValueError(f"component {component!r}: migrations registered twice, differently")


def known_components() -> dict[str, int]:
    """Registered components and the schema version this code expects for each."""
    return {name: len(migrations) for name, migrations in sorted(_registry.items())}


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
    pool: Any,
    components: Iterable[str] | None = None,
    *,
    registry: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, int]:
    """Bring ``components`` (default: every registered one) to their newest version.

    ``registry`` replaces the registered migrations (tests of the runner itself).
    Returns component -> version now applied. ``StorageError`` when the database
    is ahead of this code (a newer Hearth migrated it) or a migration fails; a
    failed migration leaves its component at the previous version.
    """
    known = _registry if registry is None else registry
    names = sorted(known if components is None else components)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no migrations registered for {', '.join(unknown)}")
    versions: dict[str, int] = {}
    async with pool.acquire() as conn:
        for name in names:
            versions[name] = await _migrate(conn, name, tuple(known[name]))
    return versions


async def migrated_pool(storage: StorageSettings, components: Iterable[str]) -> Any:
    """The process's pool (``pool_for``, sized by ``storage``) with ``components``
    migrated: how every PostgreSQL store opens. Released again if migrating fails;
    otherwise the caller gives it back with ``release_pool``."""
    pool = await pool_for(
        storage.postgres_dsn or "", min_size=storage.pool_min_size, max_size=storage.pool_max_size
    )
    try:
        await apply_migrations(pool, components)
    except BaseException:
        await release_pool(pool)
        raise
    return pool


async def _migrate(conn: Any, component: str, migrations: tuple[str, ...]) -> int:
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        await conn.execute(_CREATE_SCHEMA_TABLE)
        row = await conn.fetchrow(
            f"SELECT version FROM {SCHEMA_TABLE} WHERE component = $1", component
        )
        applied = int(row["version"]) if row else 0
        if applied > len(migrations):
            raise StorageError(
                f"{SCHEMA_TABLE}: component {component!r} is at version {applied}, but this "
                f"Hearth knows only up to {len(migrations)}: run a Hearth at least as new as "
                "the one that migrated the database"
            )
        for version in range(applied + 1, len(migrations) + 1):
            try:
                await conn.execute(migrations[version - 1])
            except Exception as exc:
                raise StorageError(
                    f"{SCHEMA_TABLE}: migration {component} {version} failed: {exc}"
                ) from exc
        if len(migrations) > applied:
            await conn.execute(
                f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES ($1, $2) "
                "ON CONFLICT (component) DO UPDATE SET version = $2, applied_at = now()",
                component,
                len(migrations),
            )
    return len(migrations)


async def schema_status(pool: Any) -> list[SchemaStatus]:
    """Every component the database or this code knows, with both versions (``doctor``)."""
    async with pool.acquire() as conn:
        exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", SCHEMA_TABLE)
        rows = await conn.fetch(f"SELECT component, version FROM {SCHEMA_TABLE}") if exists else []
    applied = {str(row["component"]): int(row["version"]) for row in rows}
    expected = known_components()
    return [
        SchemaStatus(name, applied.get(name, 0), expected.get(name, 0))
        for name in sorted(set(applied) | set(expected))
    ]
