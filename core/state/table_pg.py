"""Extension state in PostgreSQL (``storage.backend: postgres``, ADR 0035).

The same rows and rules as ``StateTable`` in ``state.db``, for several
kernel processes at once: a write takes a transaction-scoped advisory lock
on its extension first, so the size accounting, the limit checks and the
eviction of one write see no other write of that extension between them
(SQLite gets the same from ``BEGIN IMMEDIATE``). Ties in the LRU order are
broken by session and key in byte order (``COLLATE "C"``), as in SQLite.
With ``events.synchronous: normal`` writes (a read renews the key's expiry,
so it writes too) commit without waiting for the server's disk flush, as
SQLite's ``NORMAL`` does without an fsync: a kernel crash loses nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from core.extensions.errors import StateLimitError
from core.extensions.state_scope import PERSON_MARK
from core.state.table import (
    EXTENSION_SCOPE,
    NODE_EXTENSIONS,
    PER_EXTENSION,
    PER_SESSION,
    REGISTERED,
    TABLE,
    Evicted,
    Limits,
    NodeRoster,
    Written,
)
from core.storage import ComponentPool, register_migrations

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["STATE_COMPONENT", "PostgresStateTable", "stamp_node"]

STATE_COMPONENT = "state"
register_migrations(
    STATE_COMPONENT,
    [
        f"""
        CREATE TABLE {TABLE} (
            ext_id text NOT NULL, session_id text NOT NULL, key text NOT NULL,
            value_json text NOT NULL, size integer NOT NULL,
            used_at double precision NOT NULL, expires_at double precision NOT NULL,
            PRIMARY KEY (ext_id, session_id, key)
        );
        CREATE INDEX {TABLE}_lru ON {TABLE} (ext_id, used_at);
        CREATE INDEX {TABLE}_sizes ON {TABLE} (ext_id, session_id, size);
        CREATE INDEX {TABLE}_expiry ON {TABLE} (ext_id, expires_at);
        CREATE TABLE {REGISTERED} (
            ext_id text PRIMARY KEY, registered_at double precision NOT NULL
        );
        """,
        f"""
        CREATE TABLE {NODE_EXTENSIONS} (
            node text NOT NULL, ext_id text NOT NULL, seen_at double precision NOT NULL,
            PRIMARY KEY (node, ext_id)
        );
        """,
    ],
)
_REGISTRY_LOCK = "hearth_state:registered"


class PostgresStateTable:
    """``StateRows`` in PostgreSQL through the process's pool (see ``StateTable``)."""

    def __init__(self, storage: StorageSettings, *, synchronous: str = "normal") -> None:
        self.storage = storage
        self.flush = synchronous.lower() == "full"
        self._pools = ComponentPool(storage, [STATE_COMPONENT], "the PostgreSQL state table is")

    async def _ready(self) -> Any:
        """The pool, taken (and the schema migrated) on first use."""
        return await self._pools.open()

    async def _durability(self, conn: Any) -> None:
        if not self.flush:
            await conn.execute("SET LOCAL synchronous_commit = off")

    async def close(self) -> None:
        await self._pools.close()

    async def prune(self, now: float) -> int:
        pool = await self._ready()
        rows = await pool.fetch(f"DELETE FROM {TABLE} WHERE expires_at <= $1 RETURNING 1", now)
        return len(rows)

    async def usage(self, ext_id: str, session_id: str | None = None) -> int:
        pool = await self._ready()
        if session_id is None:
            value = await pool.fetchval(
                f"SELECT COALESCE(SUM(size), 0) FROM {TABLE} WHERE ext_id = $1", ext_id
            )
        else:
            value = await pool.fetchval(
                f"SELECT COALESCE(SUM(size), 0) FROM {TABLE} WHERE ext_id = $1 AND session_id = $2",
                ext_id,
                session_id,
            )
        return int(value)

    async def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> str | None:
        pool = await self._ready()
        where = "ext_id = $1 AND session_id = $2 AND key = $3 AND expires_at > $4"
        if ttl_s is None:
            value = await pool.fetchval(
                f"SELECT value_json FROM {TABLE} WHERE {where}", ext_id, session_id, key, now
            )
        else:
            async with pool.acquire() as conn, conn.transaction():
                await self._durability(conn)
                value = await conn.fetchval(
                    f"UPDATE {TABLE} SET used_at = $4, expires_at = $5 WHERE {where}"
                    " RETURNING value_json",
                    ext_id,
                    session_id,
                    key,
                    now,
                    now + ttl_s,
                )
        return None if value is None else str(value)

    async def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> Written:
        size = len(key.encode()) + len(value_json.encode())
        if size > limits.max_bytes_per_extension:
            raise StateLimitError(
                ext_id, key, "the value", size, limits.max_bytes_per_extension, PER_EXTENSION
            )
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await self._durability(conn)
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))", f"hearth_state:{ext_id}"
            )
            await conn.execute(
                f"DELETE FROM {TABLE} WHERE ext_id = $1 AND expires_at <= $2", ext_id, now
            )
            old = (
                await conn.fetchval(
                    f"SELECT size FROM {TABLE} WHERE ext_id = $1 AND session_id = $2 AND key = $3",
                    ext_id,
                    session_id,
                    key,
                )
                or 0
            )
            extension_before = int(
                await conn.fetchval(
                    f"SELECT COALESCE(SUM(size), 0) FROM {TABLE} WHERE ext_id = $1", ext_id
                )
            )
            session_before = int(
                await conn.fetchval(
                    f"SELECT COALESCE(SUM(size), 0) FROM {TABLE}"
                    " WHERE ext_id = $1 AND session_id = $2",
                    ext_id,
                    session_id,
                )
            )
            session_after = session_before - old + size
            if session_id != EXTENSION_SCOPE and session_after > limits.max_bytes_per_session:
                raise StateLimitError(
                    ext_id,
                    key,
                    "this session's state",
                    session_after,
                    limits.max_bytes_per_session,
                    PER_SESSION,
                )
            await conn.execute(
                f"INSERT INTO {TABLE} (ext_id, session_id, key, value_json, size, used_at,"
                " expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                " ON CONFLICT (ext_id, session_id, key) DO UPDATE SET"
                " value_json = excluded.value_json, size = excluded.size,"
                " used_at = excluded.used_at, expires_at = excluded.expires_at",
                ext_id,
                session_id,
                key,
                value_json,
                size,
                now,
                now + limits.ttl_s,
            )
            extension_after = extension_before - old + size
            evicted = await _evict(
                conn, ext_id, (session_id, key), extension_after - limits.max_bytes_per_extension
            )
        for gone in evicted:
            extension_after -= gone.size
            if gone.session_id == session_id:
                session_after -= gone.size
        return Written(
            extension_before, extension_after, session_before, session_after, tuple(evicted)
        )

    async def delete(self, ext_id: str, session_id: str, key: str) -> bool:
        pool = await self._ready()
        gone = await pool.fetchval(
            f"DELETE FROM {TABLE} WHERE ext_id = $1 AND session_id = $2 AND key = $3 RETURNING 1",
            ext_id,
            session_id,
            key,
        )
        return gone is not None

    async def clear(self, ext_id: str, session_id: str) -> int:
        pool = await self._ready()
        rows = await pool.fetch(
            f"DELETE FROM {TABLE} WHERE ext_id = $1 AND session_id = $2 RETURNING 1",
            ext_id,
            session_id,
        )
        return len(rows)

    async def clear_session(self, session_id: str) -> dict[str, int]:
        pool = await self._ready()
        rows = await pool.fetch(
            f"DELETE FROM {TABLE} WHERE session_id = $1 OR starts_with(session_id, $2)"
            " RETURNING ext_id",
            session_id,
            session_id + PERSON_MARK,
        )
        counts: dict[str, int] = {}
        for (ext_id,) in rows:
            counts[ext_id] = counts.get(ext_id, 0) + 1
        return counts

    async def reconcile_extensions(
        self, installed: Collection[str], now: float, roster: NodeRoster | None = None
    ) -> tuple[list[str], dict[str, int], list[str]]:
        """As ``StateTable.reconcile_extensions``; with a ``roster``, this node's list of
        installed extensions is stamped first, and an extension another node listed
        within ``roster.grace_s`` is not gone: one node's view never unregisters what
        another still runs (a rolling upgrade, ADR 0039). Returns those kept so."""
        pool = await self._ready()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", _REGISTRY_LOCK)
            elsewhere: set[str] = set()
            if roster is not None:
                await _stamp(conn, roster.node, installed, now)
                rows = await conn.fetch(
                    f"SELECT DISTINCT ext_id FROM {NODE_EXTENSIONS}"
                    " WHERE node <> $1 AND seen_at >= $2",
                    roster.node,
                    now - roster.grace_s,
                )
                elsewhere = {str(r[0]) for r in rows}
            known = {str(r[0]) for r in await conn.fetch(f"SELECT ext_id FROM {REGISTERED}")}
            rows = await conn.fetch(f"SELECT ext_id, COUNT(*) FROM {TABLE} GROUP BY ext_id")
            keys = {str(ext_id): int(n) for ext_id, n in rows}
            missing = (known | set(keys)) - set(installed)
            gone = {e: keys.get(e, 0) for e in sorted(missing - elsewhere)}
            new = sorted(set(installed) - known)
            await conn.execute(f"DELETE FROM {TABLE} WHERE ext_id = ANY($1::text[])", list(gone))
            await conn.execute(
                f"DELETE FROM {REGISTERED} WHERE ext_id = ANY($1::text[])", list(gone)
            )
            await conn.executemany(
                f"INSERT INTO {REGISTERED} (ext_id, registered_at) VALUES ($1, $2)"
                " ON CONFLICT DO NOTHING",
                [(e, now) for e in new],
            )
        return new, gone, sorted(missing & elsewhere)


async def stamp_node(pool: Any, node: str, now: float) -> None:
    """``node`` is still running with the extensions it listed at its start: its list
    keeps counting for other nodes' reconciliations (see ``NodeRoster.grace_s``)."""
    await pool.execute(f"UPDATE {NODE_EXTENSIONS} SET seen_at = $2 WHERE node = $1", node, now)


async def _stamp(conn: Any, node: str, installed: Collection[str], now: float) -> None:
    await conn.execute(f"DELETE FROM {NODE_EXTENSIONS} WHERE node = $1", node)
    await conn.executemany(
        f"INSERT INTO {NODE_EXTENSIONS} (node, ext_id, seen_at) VALUES ($1, $2, $3)",
        [(node, e, now) for e in sorted(installed)],
    )


async def _evict(conn: Any, ext_id: str, keep: tuple[str, str], excess: int) -> list[Evicted]:
    """Delete the extension's least recently used rows (never ``keep``) until
    ``excess`` bytes are gone; oldest ``used_at`` first, ties by session and key."""
    evicted: list[Evicted] = []
    if excess <= 0:
        return evicted
    rows = await conn.fetch(
        f"SELECT session_id, key, size FROM {TABLE} WHERE ext_id = $1"
        ' ORDER BY used_at, session_id COLLATE "C", key COLLATE "C"',
        ext_id,
    )
    for session_id, key, size in rows:
        if (session_id, key) == keep:
            continue
        evicted.append(Evicted(session_id, key, int(size)))
        excess -= int(size)
        if excess <= 0:
            break
    await conn.executemany(
        f"DELETE FROM {TABLE} WHERE ext_id = $1 AND session_id = $2 AND key = $3",
        [(ext_id, e.session_id, e.key) for e in evicted],
    )
    return evicted
