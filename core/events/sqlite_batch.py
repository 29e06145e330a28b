"""The SQLite side of a group commit: plain ``sqlite3`` code run on the connection's thread.

Each public function here is called once per batch through aiosqlite's worker
thread, so a whole batch (publishes, acks, claims, fan-out) costs one thread
hop and one transaction. Nothing here touches the event loop.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from core.events.journal import (
    PROCESS_DIED,
    BatchResult,
    ClaimRequest,
    ClaimResult,
    NewEvent,
    Outcome,
    Registration,
    WriteBatch,
)
from core.events.models import Event
from core.events.payloads import decode_payload
from core.events.topics import topic_matches

__all__ = ["SCHEMA", "SCHEMA_VERSION", "FanoutState", "apply_batch", "purge_chunk"]

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    source TEXT NOT NULL,
    payload TEXT NOT NULL,
    correlation_id TEXT,
    idempotency_key TEXT,
    created_at REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_idempotency
    ON events(idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS deliveries (
    event_id INTEGER NOT NULL,
    subscriber_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0,
    recovered INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (event_id, subscriber_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_pending
    ON deliveries(subscriber_id, event_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS deliveries_inflight
    ON deliveries(subscriber_id, event_id) WHERE status = 'inflight';
CREATE INDEX IF NOT EXISTS deliveries_dead ON deliveries(updated_at) WHERE status = 'dead';
CREATE TABLE IF NOT EXISTS subscribers (
    id TEXT PRIMARY KEY,
    pattern TEXT NOT NULL,
    cursor INTEGER NOT NULL,
    last_seen REAL NOT NULL
);
"""

_INSERT_EVENT = (
    "INSERT INTO events (topic, source, payload, correlation_id, idempotency_key, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_DELIVERY = (
    "INSERT OR IGNORE INTO deliveries (event_id, subscriber_id, status, attempt, updated_at)"
    " VALUES (?, ?, ?, ?, ?)"
)
# The common per-event statements of a batch run once per subscriber, over a JSON
# array of event ids: one statement instead of one binding and step per row.
_INSERT_DELIVERIES = (
    "INSERT OR IGNORE INTO deliveries (event_id, subscriber_id, status, attempt, updated_at)"
    " SELECT value, ?, ?, ?, ? FROM json_each(?)"
)
_MARK_DONE = (
    "UPDATE deliveries SET status = 'done', error = NULL, updated_at = ?"
    " WHERE subscriber_id = ? AND status = 'inflight'"
    " AND event_id IN (SELECT value FROM json_each(?))"
)
_CLAIM_SELECT = (
    "SELECT d.event_id, d.attempt, d.recovered, e.topic, e.source, e.payload,"
    " e.correlation_id, e.created_at"
    " FROM deliveries d JOIN events e ON e.id = d.event_id"
    " WHERE d.subscriber_id = ? AND d.status = 'pending' AND d.next_at <= ?"
    " ORDER BY d.event_id LIMIT ?"
)
_OUTCOME_SQL = {
    "retry": "UPDATE deliveries SET status = 'pending', next_at = ?, error = ?, updated_at = ?"
    " WHERE event_id = ? AND subscriber_id = ? AND status = 'inflight'",
    "dead": "UPDATE deliveries SET status = 'dead', error = ?, updated_at = ?"
    " WHERE event_id = ? AND subscriber_id = ? AND status = 'inflight'",
    "released": "UPDATE deliveries SET status = 'pending', attempt = max(attempt - 1, 0),"
    " next_at = 0, updated_at = ? WHERE event_id = ? AND subscriber_id = ? AND status = 'inflight'",
}


@dataclass(slots=True)
class FanoutState:
    """The highest event id already fanned out to this process's active subscribers."""

    last_id: int = 0


def apply_batch(conn: sqlite3.Connection, state: FanoutState, batch: WriteBatch) -> BatchResult:
    """Apply ``batch`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any error."""
    start_id = state.last_id
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = BatchResult(event_ids=[], claims={}, queued=set(), next_retry_at={})
        _fan_out_foreign(conn, state, batch, result)
        for reg in batch.registrations:
            _register(conn, state, reg, batch.now, result)
        _insert_events(conn, state, batch.events, batch.now, result)
        _apply_outcomes(conn, batch.outcomes, batch.now, result)
        for claim in batch.claims:
            result.claims[claim.subscriber_id] = _claim(conn, claim, batch.now)
        if state.last_id != start_id or batch.registrations:
            ids = set(batch.active) | {reg.subscriber_id for reg in batch.registrations}
            conn.executemany(
                "UPDATE subscribers SET cursor = ? WHERE id = ?",
                [(state.last_id, sid) for sid in ids],
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        state.last_id = start_id
        raise
    return result


def _fan_out_foreign(
    conn: sqlite3.Connection, state: FanoutState, batch: WriteBatch, result: BatchResult
) -> None:
    """Give active subscribers the events other processes wrote since our last batch."""
    (head,) = conn.execute("SELECT max(id) FROM events").fetchone()
    if head is None or head <= state.last_id:
        return
    if batch.active:
        rows = conn.execute(
            "SELECT id, topic FROM events WHERE id > ? ORDER BY id", (state.last_id,)
        ).fetchall()
        _queue_matching(conn, rows, batch.active.items(), batch.now, result)
    state.last_id = head


def _queue_matching(
    conn: sqlite3.Connection,
    rows: Iterable[tuple[int, str]],
    subscribers: Iterable[tuple[str, str]],
    now: float,
    result: BatchResult,
) -> None:
    subs = list(subscribers)
    params = []
    for event_id, topic in rows:
        for sid, pattern in subs:
            if topic_matches(pattern, topic):
                params.append((event_id, sid, "pending", 0, now))
                result.queued.add(sid)
    conn.executemany(_INSERT_DELIVERY, params)


def _register(
    conn: sqlite3.Connection,
    state: FanoutState,
    reg: Registration,
    now: float,
    result: BatchResult,
) -> None:
    """New subscriber: cursor at the head. Known one: catch up and recover its in-flight
    rows (a declared one, subscribed elsewhere, is only seen)."""
    row = conn.execute(
        "SELECT cursor FROM subscribers WHERE id = ?", (reg.subscriber_id,)
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO subscribers (id, pattern, cursor, last_seen) VALUES (?, ?, ?, ?)",
            (reg.subscriber_id, reg.pattern, state.last_id, now),
        )
        return
    if reg.declared:  # subscribed elsewhere: its cursor stays where it is
        conn.execute("UPDATE subscribers SET last_seen = ? WHERE id = ?", (now, reg.subscriber_id))
        return
    missed = conn.execute(
        "SELECT id, topic FROM events WHERE id > ? AND id <= ? ORDER BY id", (row[0], state.last_id)
    ).fetchall()
    _queue_matching(conn, missed, [(reg.subscriber_id, reg.pattern)], now, result)
    conn.execute(
        "UPDATE subscribers SET pattern = ?, cursor = ?, last_seen = ? WHERE id = ?",
        (reg.pattern, state.last_id, now, reg.subscriber_id),
    )
    conn.execute(
        "UPDATE deliveries SET status = 'dead', error = ?, updated_at = ?"
        " WHERE subscriber_id = ? AND status = 'inflight' AND attempt >= ?",
        (PROCESS_DIED, now, reg.subscriber_id, reg.max_attempts),
    )
    recovered = conn.execute(
        "UPDATE deliveries SET status = 'pending', recovered = 1, next_at = 0, error = ?,"
        " updated_at = ? WHERE subscriber_id = ? AND status = 'inflight'",
        (PROCESS_DIED, now, reg.subscriber_id),
    ).rowcount
    if recovered:
        result.queued.add(reg.subscriber_id)


def _insert_events(
    conn: sqlite3.Connection,
    state: FanoutState,
    events: list[NewEvent],
    now: float,
    result: BatchResult,
) -> None:
    """Insert events (runs without an idempotency key in one ``executemany``) and deliveries."""
    claimed: dict[str, list[int]] = {}  # subscriber -> event ids delivered in flight
    queued: dict[str, list[int]] = {}  # subscriber -> event ids left pending
    run: list[NewEvent] = []
    for ev in events:
        if ev.idempotency_key is None:
            run.append(ev)
            continue
        _insert_run(conn, state, run, result, claimed, queued)
        run = []
        dup = conn.execute(
            "SELECT id FROM events WHERE idempotency_key = ?", (ev.idempotency_key,)
        ).fetchone()
        if dup is None:
            _insert_run(conn, state, [ev], result, claimed, queued)
        else:
            result.event_ids.append((dup[0], False))
    _insert_run(conn, state, run, result, claimed, queued)
    for sid, ids in claimed.items():
        conn.execute(_INSERT_DELIVERIES, (sid, "inflight", 1, now, json.dumps(ids)))
    for sid, ids in queued.items():
        conn.execute(_INSERT_DELIVERIES, (sid, "pending", 0, now, json.dumps(ids)))
    result.queued.update(queued)


def _insert_run(
    conn: sqlite3.Connection,
    state: FanoutState,
    run: list[NewEvent],
    result: BatchResult,
    claimed: dict[str, list[int]],
    queued: dict[str, list[int]],
) -> None:
    """Insert ``run`` in order. We hold the write lock and ids are AUTOINCREMENT, so
    the statements get consecutive ids ending at ``last_insert_rowid()``."""
    if not run:
        return
    conn.executemany(
        _INSERT_EVENT,
        [
            (
                ev.topic,
                ev.source,
                ev.payload_json,
                ev.correlation_id,
                ev.idempotency_key,
                ev.created_at,
            )
            for ev in run
        ],
    )
    (last_id,) = conn.execute("SELECT last_insert_rowid()").fetchone()
    state.last_id = last_id
    for event_id, ev in enumerate(run, start=last_id - len(run) + 1):
        result.event_ids.append((event_id, True))
        for sid in ev.claimed_by:
            claimed.setdefault(sid, []).append(event_id)
        for sid in ev.queued_for:
            queued.setdefault(sid, []).append(event_id)


def _apply_outcomes(
    conn: sqlite3.Connection, outcomes: list[Outcome], now: float, result: BatchResult
) -> None:
    done: dict[str, list[int]] = {}  # subscriber -> event ids
    other: dict[str, list[tuple[object, ...]]] = {}  # status -> statement parameters
    for o in outcomes:
        if o.status == "done":
            done.setdefault(o.subscriber_id, []).append(o.event_id)
            continue
        key = (o.event_id, o.subscriber_id)
        if o.status == "retry":
            params: tuple[object, ...] = (o.next_at, o.error, now, *key)
            earliest = result.next_retry_at.get(o.subscriber_id, o.next_at)
            result.next_retry_at[o.subscriber_id] = min(earliest, o.next_at)
        elif o.status == "dead":
            params = (o.error, now, *key)
        else:
            params = (now, *key)
        other.setdefault(o.status, []).append(params)
    for sid, ids in done.items():
        conn.execute(_MARK_DONE, (now, sid, json.dumps(ids)))
    for status, rows in other.items():
        conn.executemany(_OUTCOME_SQL[status], rows)


def _claim(conn: sqlite3.Connection, req: ClaimRequest, now: float) -> ClaimResult:
    rows = conn.execute(_CLAIM_SELECT, (req.subscriber_id, now, req.limit)).fetchall()
    taken: list[tuple[Any, ...]] = []
    blocked = solo = False
    for row in rows:
        if row[2]:  # recovered: its process died while handling it; run it alone
            if not taken and req.alone:
                taken.append(row)
                solo = True
            else:
                blocked = not taken
            break
        taken.append(row)
    conn.executemany(
        "UPDATE deliveries SET status = 'inflight', attempt = attempt + 1, recovered = 0,"
        " updated_at = ? WHERE event_id = ? AND subscriber_id = ?",
        [(now, row[0], req.subscriber_id) for row in taken],
    )
    events = [
        Event(
            id=row[0],
            topic=row[3],
            source=row[4],
            payload=decode_payload(row[5]),
            correlation_id=row[6],
            created_at=row[7],
            attempt=row[1] + 1,
        )
        for row in taken
    ]
    exhausted = len(rows) < req.limit and len(taken) == len(rows)
    return ClaimResult(events=events, exhausted=exhausted, blocked=blocked, solo=solo)


def purge_chunk(
    conn: sqlite3.Connection,
    older_than: float,
    now: float,
    keep_subscribers: Collection[str],
    chunk: int = 2000,
) -> int:
    """Delete up to ``chunk`` finished events created before ``older_than``.

    Subscribers not seen since ``older_than`` are forgotten first; an event a
    remembered subscriber has not caught up with yet is kept.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "UPDATE subscribers SET last_seen = ? WHERE id = ?",
            [(now, sid) for sid in keep_subscribers],
        )
        conn.execute("DELETE FROM subscribers WHERE last_seen < ?", (older_than,))
        (min_cursor,) = conn.execute("SELECT min(cursor) FROM subscribers").fetchone()
        ids = [
            (row[0],)
            for row in conn.execute(
                "SELECT id FROM events e WHERE created_at < ? AND id <= ? AND NOT EXISTS"
                " (SELECT 1 FROM deliveries d WHERE d.event_id = e.id"
                " AND d.status IN ('pending', 'inflight')) ORDER BY id LIMIT ?",
                (older_than, min_cursor if min_cursor is not None else 2**62, chunk),
            )
        ]
        conn.executemany("DELETE FROM deliveries WHERE event_id = ?", ids)
        conn.executemany("DELETE FROM events WHERE id = ?", ids)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(ids)
