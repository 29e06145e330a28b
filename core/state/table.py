"""The table of extension state, on ``state.db`` or PostgreSQL: one short transaction per call.

One ``StateTable`` on ``core.storage`` serves both databases (ADR 0051):
``state.db`` keeps one connection on a thread of its own (in call order, off
the event loop); PostgreSQL shares the process's pool among several kernel
processes (ADR 0035). A write takes its extension's lock first — the file's
write lock (``BEGIN IMMEDIATE``) on SQLite, a transaction-scoped advisory
lock on PostgreSQL — so the size accounting, the limit checks and the
eviction of one write see no other write of that extension between them.
Ties in the LRU order are broken by session and key in byte order. A row's
``used_at`` is when it was last read or written; a row with ``expires_at``
in the past is invisible and pruned. With ``events.synchronous: normal``
writes commit without waiting for the disk (SQLite ``NORMAL``, PostgreSQL
``synchronous_commit = off``): a kernel crash loses nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.access.state_scope import PERSON_MARK
from core.extensions.errors import StateLimitError
from core.storage import (
    Database,
    Executor,
    PostgresDatabase,
    SQLiteDatabase,
    byte_order,
    lock_named,
    register_migrations,
    upsert,
)

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "EXTENSION_SCOPE",
    "STATE_COMPONENT",
    "Evicted",
    "Limits",
    "NodeRoster",
    "StateTable",
    "Written",
    "stamp_node",
]

TABLE = "hearth_extension_state"
REGISTERED = "hearth_registered_extensions"  # extensions installed in this data dir
NODE_EXTENSIONS = "hearth_node_extensions"  # what each node has installed (ADR 0039)
EXTENSION_SCOPE = ""  # the session_id of an extension's extension-wide rows
PER_EXTENSION = "state.max_bytes_per_extension"
PER_SESSION = "state.max_bytes_per_session"
STATE_COMPONENT = "state"
_REGISTRY_LOCK = "hearth_state:registered"

register_migrations(
    STATE_COMPONENT,
    postgres=[
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
    # version 1 is the schema the code before the runner created at every connect
    sqlite=[
        f"""
        CREATE TABLE IF NOT EXISTS {TABLE} (
            ext_id TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL,
            value_json TEXT NOT NULL, size INTEGER NOT NULL,
            used_at REAL NOT NULL, expires_at REAL NOT NULL,
            PRIMARY KEY (ext_id, session_id, key)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS {TABLE}_lru ON {TABLE} (ext_id, used_at);
        CREATE INDEX IF NOT EXISTS {TABLE}_sizes ON {TABLE} (ext_id, session_id, size);
        CREATE INDEX IF NOT EXISTS {TABLE}_expiry ON {TABLE} (ext_id, expires_at);
        CREATE TABLE IF NOT EXISTS {REGISTERED}
            (ext_id TEXT PRIMARY KEY, registered_at REAL NOT NULL);
        """,
        f"""
        CREATE TABLE {NODE_EXTENSIONS} (
            node TEXT NOT NULL, ext_id TEXT NOT NULL, seen_at REAL NOT NULL,
            PRIMARY KEY (node, ext_id)
        );
        """,
    ],
)

_PUT = upsert(
    TABLE,
    ("ext_id", "session_id", "key", "value_json", "size", "used_at", "expires_at"),
    ("ext_id", "session_id", "key"),
)


@dataclass(frozen=True, slots=True)
class NodeRoster:
    """This kernel process among several sharing the state (PostgreSQL, ADR 0039): its
    node, and how long another node's list of installed extensions still counts after
    that node last stamped it (a node not seen for that long is gone)."""

    node: str
    grace_s: float


@dataclass(frozen=True, slots=True)
class Limits:
    """The ``state.*`` settings a write is held to."""

    ttl_s: float
    max_bytes_per_extension: int
    max_bytes_per_session: int


@dataclass(frozen=True, slots=True)
class Evicted:
    """A key a write pushed out (least recently used first)."""

    session_id: str
    key: str
    size: int


@dataclass(frozen=True, slots=True)
class Written:
    """What one write changed: the extension's and the session's bytes, before and after."""

    extension_before: int
    extension_after: int
    session_before: int
    session_after: int
    evicted: tuple[Evicted, ...]


class StateTable:
    """Rows keyed by (extension id, session id, key); ``EXTENSION_SCOPE`` for extension-wide.
    Opened (and migrated) on first use; ``close`` gives the connection back and a later
    call opens it again."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def at(
        cls, db_path: Path, storage: StorageSettings | None = None, *, synchronous: str = "normal"
    ) -> StateTable:
        """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``state.db``)."""
        if storage is not None and storage.backend == "postgres":
            return cls(
                PostgresDatabase(
                    storage, [STATE_COMPONENT], "the state table is", synchronous=synchronous
                )
            )
        return cls(SQLiteDatabase(db_path, [STATE_COMPONENT], synchronous=synchronous, wal=True))

    async def _ready(self) -> Database:
        if not self.db.is_open:
            await self.db.open()
        return self.db

    async def close(self) -> None:
        await self.db.close()

    # ------------------------------------------------------------ upkeep

    async def prune(self, now: float) -> int:
        db = await self._ready()
        async with db.transaction() as tx:
            return await tx.execute(f"DELETE FROM {TABLE} WHERE expires_at <= ?", now)

    async def usage(self, ext_id: str, session_id: str | None = None) -> int:
        """Bytes the extension holds (in one session, when given), expired rows included
        until they are pruned."""
        sql = f"SELECT COALESCE(SUM(size), 0) FROM {TABLE} WHERE ext_id = ?"
        args: tuple[str, ...] = (ext_id,)
        if session_id is not None:
            sql, args = sql + " AND session_id = ?", (ext_id, session_id)
        db = await self._ready()
        return int(await db.fetch_value(sql, *args))

    # ------------------------------------------------------------ one key

    async def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> str | None:
        """The stored JSON, or None; with ``ttl_s`` the row's use and expiry are renewed."""
        where = "ext_id = ? AND session_id = ? AND key = ? AND expires_at > ?"
        pk = (ext_id, session_id, key, now)
        db = await self._ready()
        if ttl_s is None:
            value = await db.fetch_value(f"SELECT value_json FROM {TABLE} WHERE {where}", *pk)
        else:
            async with db.transaction() as tx:
                value = await tx.fetch_value(
                    f"UPDATE {TABLE} SET used_at = ?, expires_at = ? WHERE {where}"
                    " RETURNING value_json",
                    now,
                    now + ttl_s,
                    *pk,
                )
        return None if value is None else str(value)

    async def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> Written:
        """Store one value; refuse it over a limit, else evict the extension's least
        recently used keys until it fits in ``max_bytes_per_extension``."""
        size = len(key.encode()) + len(value_json.encode())
        if size > limits.max_bytes_per_extension:
            raise StateLimitError(
                ext_id, key, "the value", size, limits.max_bytes_per_extension, PER_EXTENSION
            )
        db = await self._ready()
        async with db.transaction() as tx:
            await lock_named(tx, f"hearth_state:{ext_id}")
            await tx.execute(
                f"DELETE FROM {TABLE} WHERE ext_id = ? AND expires_at <= ?", ext_id, now
            )
            # the key's old size, the extension's and the session's bytes: one statement
            sizes = await tx.fetch_one(
                "SELECT COALESCE(SUM(CASE WHEN session_id = ? AND key = ? THEN size END), 0),"
                " COALESCE(SUM(size), 0),"
                " COALESCE(SUM(CASE WHEN session_id = ? THEN size END), 0)"
                f" FROM {TABLE} WHERE ext_id = ?",
                session_id,
                key,
                session_id,
                ext_id,
            )
            old, extension_before, session_before = (int(n) for n in sizes or (0, 0, 0))
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
            await tx.execute(
                _PUT, ext_id, session_id, key, value_json, size, now, now + limits.ttl_s
            )
            extension_after = extension_before - old + size
            evicted = await _evict(
                tx, ext_id, (session_id, key), extension_after - limits.max_bytes_per_extension
            )
        for gone in evicted:
            extension_after -= gone.size
            if gone.session_id == session_id:
                session_after -= gone.size
        return Written(
            extension_before, extension_after, session_before, session_after, tuple(evicted)
        )

    async def delete(self, ext_id: str, session_id: str, key: str) -> bool:
        db = await self._ready()
        async with db.transaction() as tx:
            gone = await tx.execute(
                f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ? AND key = ?",
                ext_id,
                session_id,
                key,
            )
        return bool(gone)

    # ------------------------------------------------------------ many keys

    async def clear(self, ext_id: str, session_id: str) -> int:
        """Forget one extension's keys of one scope; how many there were."""
        db = await self._ready()
        async with db.transaction() as tx:
            return await tx.execute(
                f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ?", ext_id, session_id
            )

    async def clear_session(self, session_id: str) -> dict[str, int]:
        """Forget every extension's keys of one session, every person's part of it
        (``state_scope.person_session``); keys per extension."""
        person = session_id + PERSON_MARK
        db = await self._ready()
        async with db.transaction() as tx:
            rows = await tx.fetch_all(
                f"DELETE FROM {TABLE} WHERE session_id = ?"
                " OR substr(session_id, 1, length(?)) = ? RETURNING ext_id",
                session_id,
                person,
                person,
            )
        counts: dict[str, int] = {}
        for (ext_id,) in rows:
            counts[str(ext_id)] = counts.get(str(ext_id), 0) + 1
        return counts

    async def reconcile_extensions(
        self, installed: Collection[str], now: float, roster: NodeRoster | None = None
    ) -> tuple[list[str], dict[str, int], list[str]]:
        """Record ``installed`` as the registered extensions: returns those new since
        the last call, those gone (registered before, or holding state, and not
        installed now) with the state keys forgotten for each, and those missing here
        but installed on another node. With a ``roster`` (several nodes, ADR 0039),
        this node's list is stamped first, and an extension another node listed within
        ``roster.grace_s`` is not gone: one node's view never unregisters what another
        still runs (a rolling upgrade)."""
        db = await self._ready()
        async with db.transaction() as tx:
            await lock_named(tx, _REGISTRY_LOCK)
            elsewhere: set[str] = set()
            if roster is not None:
                await tx.execute(f"DELETE FROM {NODE_EXTENSIONS} WHERE node = ?", roster.node)
                await tx.execute_many(
                    f"INSERT INTO {NODE_EXTENSIONS} (node, ext_id, seen_at) VALUES (?, ?, ?)",
                    [(roster.node, e, now) for e in sorted(installed)],
                )
                rows = await tx.fetch_all(
                    f"SELECT DISTINCT ext_id FROM {NODE_EXTENSIONS}"
                    " WHERE node <> ? AND seen_at >= ?",
                    roster.node,
                    now - roster.grace_s,
                )
                elsewhere = {str(r[0]) for r in rows}
            known = {str(r[0]) for r in await tx.fetch_all(f"SELECT ext_id FROM {REGISTERED}")}
            rows = await tx.fetch_all(f"SELECT ext_id, COUNT(*) FROM {TABLE} GROUP BY ext_id")
            keys = {str(ext_id): int(n) for ext_id, n in rows}
            missing = (known | set(keys)) - set(installed)
            gone = {e: keys.get(e, 0) for e in sorted(missing - elsewhere)}
            new = sorted(set(installed) - known)
            await tx.execute_many(f"DELETE FROM {TABLE} WHERE ext_id = ?", [(e,) for e in gone])
            await tx.execute_many(
                f"DELETE FROM {REGISTERED} WHERE ext_id = ?", [(e,) for e in gone]
            )
            await tx.execute_many(
                f"INSERT INTO {REGISTERED} (ext_id, registered_at) VALUES (?, ?)"
                " ON CONFLICT DO NOTHING",
                [(e, now) for e in new],
            )
        return new, gone, sorted(missing & elsewhere)


async def stamp_node(pool: Any, node: str, now: float) -> None:
    """``node`` is still running with the extensions it listed at its start: its list
    keeps counting for other nodes' reconciliations (see ``NodeRoster.grace_s``)."""
    await pool.execute(f"UPDATE {NODE_EXTENSIONS} SET seen_at = $2 WHERE node = $1", node, now)


async def _evict(tx: Executor, ext_id: str, keep: tuple[str, str], excess: int) -> list[Evicted]:
    """Delete the extension's least recently used rows (never ``keep``) until
    ``excess`` bytes are gone; oldest ``used_at`` first, ties by session and key."""
    evicted: list[Evicted] = []
    if excess <= 0:
        return evicted
    order = byte_order(tx.dialect)
    rows = await tx.fetch_all(
        f"SELECT session_id, key, size FROM {TABLE} WHERE ext_id = ?"
        f" ORDER BY used_at, session_id{order}, key{order}",
        ext_id,
    )
    for session_id, key, size in rows:
        if (session_id, key) == keep:
            continue
        evicted.append(Evicted(str(session_id), str(key), int(size)))
        excess -= int(size)
        if excess <= 0:
            break
    await tx.execute_many(
        f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ? AND key = ?",
        [(ext_id, e.session_id, e.key) for e in evicted],
    )
    return evicted
