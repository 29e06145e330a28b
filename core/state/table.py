"""The table of extension state in ``state.db``: one short transaction per call.

Synchronous on purpose: ``StateStore`` runs every call in its one worker
thread, so the table keeps one connection (opened there on first use, closed
by ``close``) instead of paying a connect and a WAL checkpoint per call.
Writes take the database lock first (``BEGIN IMMEDIATE``), so the size
accounting, the limit checks and the eviction of one write see no other
write between them. A row's ``used_at`` is when it was last read or written
(the LRU order); a row with ``expires_at`` in the past is invisible and pruned.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.extensions.errors import StateLimitError
from core.extensions.state_scope import PERSON_MARK

__all__ = ["EXTENSION_SCOPE", "Evicted", "Limits", "NodeRoster", "StateTable", "Written"]

TABLE = "hearth_extension_state"
REGISTERED = "hearth_registered_extensions"  # extensions installed in this data dir
NODE_EXTENSIONS = "hearth_node_extensions"  # PostgreSQL: what each node has installed
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " ext_id TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL,"
    " value_json TEXT NOT NULL, size INTEGER NOT NULL,"
    " used_at REAL NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (ext_id, session_id, key)) WITHOUT ROWID",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_lru ON {TABLE} (ext_id, used_at)",
    # the sums of a write read this index only, never the values
    f"CREATE INDEX IF NOT EXISTS {TABLE}_sizes ON {TABLE} (ext_id, session_id, size)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_expiry ON {TABLE} (ext_id, expires_at)",
    f"CREATE TABLE IF NOT EXISTS {REGISTERED}"
    " (ext_id TEXT PRIMARY KEY, registered_at REAL NOT NULL)",
)
EXTENSION_SCOPE = ""  # the session_id of an extension's extension-wide rows
BUSY_TIMEOUT_S = 10.0
PER_EXTENSION = "state.max_bytes_per_extension"
PER_SESSION = "state.max_bytes_per_session"


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
    """Rows keyed by (extension id, session id, key); ``EXTENSION_SCOPE`` for extension-wide."""

    def __init__(self, db_path: Path, *, synchronous: str = "normal") -> None:
        self.db_path = db_path
        self.synchronous = "FULL" if synchronous.lower() == "full" else "NORMAL"
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.db_path, timeout=BUSY_TIMEOUT_S)
            conn.isolation_level = None  # transactions are explicit
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            for statement in SCHEMA:
                conn.execute(statement)
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Close the connection (checkpointing the WAL); the next call opens another."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------ upkeep

    def prune(self, now: float) -> int:
        with self._transaction() as conn:
            return conn.execute(f"DELETE FROM {TABLE} WHERE expires_at <= ?", (now,)).rowcount

    def usage(self, ext_id: str, session_id: str | None = None) -> int:
        """Bytes the extension holds (in one session, when given), expired rows included
        until they are pruned."""
        sql = f"SELECT COALESCE(SUM(size), 0) FROM {TABLE} WHERE ext_id = ?"
        args: tuple[str, ...] = (ext_id,)
        if session_id is not None:
            sql, args = sql + " AND session_id = ?", (ext_id, session_id)
        return int(self._connection().execute(sql, args).fetchone()[0])

    # ------------------------------------------------------------ one key

    def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> str | None:
        """The stored JSON, or None; with ``ttl_s`` the row's use and expiry are renewed."""
        where = "ext_id = ? AND session_id = ? AND key = ?"
        pk = (ext_id, session_id, key)
        if ttl_s is None:
            row = (
                self._connection()
                .execute(
                    f"SELECT value_json FROM {TABLE} WHERE {where} AND expires_at > ?", (*pk, now)
                )
                .fetchone()
            )
            return None if row is None else str(row[0])
        with self._transaction() as conn:
            row = conn.execute(
                f"UPDATE {TABLE} SET used_at = ?, expires_at = ? WHERE {where} AND expires_at > ?"
                " RETURNING value_json",
                (now, now + ttl_s, *pk, now),
            ).fetchone()
        return None if row is None else str(row[0])

    def write(
        self,
        ext_id: str,
        session_id: str,
        key: str,
        value_json: str,
        now: float,
        limits: Limits,
    ) -> Written:
        """Store one value; refuse it over a limit, else evict the extension's least
        recently used keys until it fits in ``max_bytes_per_extension``."""
        size = len(key.encode()) + len(value_json.encode())
        if size > limits.max_bytes_per_extension:
            raise StateLimitError(
                ext_id, key, "the value", size, limits.max_bytes_per_extension, PER_EXTENSION
            )
        with self._transaction() as conn:
            conn.execute(f"DELETE FROM {TABLE} WHERE ext_id = ? AND expires_at <= ?", (ext_id, now))
            old = _one(
                conn,
                f"SELECT size FROM {TABLE} WHERE ext_id = ? AND session_id = ? AND key = ?",
                (ext_id, session_id, key),
            )
            extension_before = _one(
                conn, f"SELECT SUM(size) FROM {TABLE} WHERE ext_id = ?", (ext_id,)
            )
            session_before = _one(
                conn,
                f"SELECT SUM(size) FROM {TABLE} WHERE ext_id = ? AND session_id = ?",
                (ext_id, session_id),
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
            conn.execute(
                f"INSERT INTO {TABLE} (ext_id, session_id, key, value_json, size, used_at,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (ext_id, session_id, key) DO UPDATE SET"
                " value_json = excluded.value_json, size = excluded.size,"
                " used_at = excluded.used_at, expires_at = excluded.expires_at",
                (ext_id, session_id, key, value_json, size, now, now + limits.ttl_s),
            )
            extension_after = extension_before - old + size
            evicted = _evict(
                conn, ext_id, (session_id, key), extension_after - limits.max_bytes_per_extension
            )
            for gone in evicted:
                extension_after -= gone.size
                if gone.session_id == session_id:
                    session_after -= gone.size
        return Written(
            extension_before, extension_after, session_before, session_after, tuple(evicted)
        )

    def delete(self, ext_id: str, session_id: str, key: str) -> bool:
        with self._transaction() as conn:
            return bool(
                conn.execute(
                    f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ? AND key = ?",
                    (ext_id, session_id, key),
                ).rowcount
            )

    # ------------------------------------------------------------ many keys

    def clear(self, ext_id: str, session_id: str) -> int:
        """Forget one extension's keys of one scope; how many there were."""
        with self._transaction() as conn:
            return conn.execute(
                f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ?", (ext_id, session_id)
            ).rowcount

    def clear_session(self, session_id: str) -> dict[str, int]:
        """Forget every extension's keys of one session, every person's part of it
        (``state_scope.person_session``); keys per extension."""
        with self._transaction() as conn:
            rows = conn.execute(
                f"DELETE FROM {TABLE} WHERE session_id = ?"
                " OR substr(session_id, 1, length(?)) = ? RETURNING ext_id",
                (session_id, session_id + PERSON_MARK, session_id + PERSON_MARK),
            ).fetchall()
        return _count(rows)

    def reconcile_extensions(
        self, installed: Collection[str], now: float, roster: NodeRoster | None = None
    ) -> tuple[list[str], dict[str, int], list[str]]:
        """Record ``installed`` as the registered extensions: returns those new since
        the last call, those gone (registered before, or holding state, and not
        installed now) with the state keys forgotten for each, and (always empty
        here: one file is one node's, ``roster`` is for PostgreSQL) those missing
        here but installed on another node."""
        with self._transaction() as conn:
            known = {str(e) for (e,) in conn.execute(f"SELECT ext_id FROM {REGISTERED}")}
            rows = conn.execute(f"SELECT ext_id, COUNT(*) FROM {TABLE} GROUP BY ext_id")
            keys = {str(ext_id): int(n) for ext_id, n in rows}
            gone = {e: keys.get(e, 0) for e in sorted((known | set(keys)) - set(installed))}
            new = sorted(set(installed) - known)
            conn.executemany(f"DELETE FROM {TABLE} WHERE ext_id = ?", [(e,) for e in gone])
            conn.executemany(f"DELETE FROM {REGISTERED} WHERE ext_id = ?", [(e,) for e in gone])
            conn.executemany(
                f"INSERT INTO {REGISTERED} (ext_id, registered_at) VALUES (?, ?)",
                [(e, now) for e in new],
            )
        return new, gone, []


def _one(conn: sqlite3.Connection, sql: str, args: tuple[str, ...]) -> int:
    row = conn.execute(sql, args).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def _count(rows: list[tuple[str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (ext_id,) in rows:
        counts[ext_id] = counts.get(ext_id, 0) + 1
    return counts


def _evict(
    conn: sqlite3.Connection, ext_id: str, keep: tuple[str, str], excess: int
) -> list[Evicted]:
    """Delete the extension's least recently used rows (never ``keep``) until
    ``excess`` bytes are gone; oldest ``used_at`` first, ties by session and key."""
    evicted: list[Evicted] = []
    if excess <= 0:
        return evicted
    cursor = conn.execute(
        f"SELECT session_id, key, size FROM {TABLE} WHERE ext_id = ?"
        " ORDER BY used_at, session_id, key",
        (ext_id,),
    )
    for session_id, key, size in cursor:
        if (session_id, key) == keep:
            continue
        evicted.append(Evicted(session_id, key, int(size)))
        excess -= int(size)
        if excess <= 0:
            break
    cursor.close()
    conn.executemany(
        f"DELETE FROM {TABLE} WHERE ext_id = ? AND session_id = ? AND key = ?",
        [(ext_id, e.session_id, e.key) for e in evicted],
    )
    return evicted
