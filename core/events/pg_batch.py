"""The PostgreSQL side of a group commit: one transaction per ``WriteBatch``.

The same steps as ``sqlite_batch`` in the same order (foreign fan-out,
registrations, events, outcomes, claims), with what several processes
sharing one database need: claims take rows ``FOR UPDATE SKIP LOCKED`` and
stamp them with this process as ``owner``; batches that insert events or
register subscribers hold ``EVENTS_LOCK`` until they commit, so event ids
become visible in id order and a cursor never skips an id committed late;
a batch that stored events sends ``NOTIFY`` with their topics, delivered to
the other processes when it commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.events.journal import (
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
from core.events.pg_schema import EVENTS_LOCK, NOTIFY_CHANNEL
from core.events.topics import topic_matches

__all__ = ["FanoutState", "apply_batch", "notify_payload"]

_NOTIFY_MAX = 7000  # bytes; PostgreSQL's limit is 8000

_INSERT_DELIVERIES = """
INSERT INTO journal_deliveries (event_id, subscriber_id, status, attempt, owner, updated_at)
SELECT u.event_id, u.subscriber_id, u.status, u.attempt, u.owner, $6
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::integer[], $5::text[])
    AS u(event_id, subscriber_id, status, attempt, owner)
ON CONFLICT (event_id, subscriber_id) DO NOTHING
"""
_INSERT_EVENTS = """
INSERT INTO journal_events
    (id, topic, source, payload, correlation_id, idempotency_key, created_at)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                     $6::text[], $7::double precision[])
"""
_MATCH = (
    "FROM unnest($1::bigint[], $2::text[]) AS u(event_id, subscriber_id)"
    " WHERE d.event_id = u.event_id AND d.subscriber_id = u.subscriber_id"
    " AND d.status = 'inflight'"
)
_OUTCOME_SQL = {
    "done": "UPDATE journal_deliveries d SET status = 'done', error = NULL, owner = NULL,"
    f" updated_at = $3 {_MATCH}",
    "retry": "UPDATE journal_deliveries d SET status = 'pending', owner = NULL,"
    " next_at = u2.next_at, error = u2.error, updated_at = $3"
    " FROM unnest($1::bigint[], $2::text[], $5::double precision[], $6::text[])"
    " AS u2(event_id, subscriber_id, next_at, error)"
    " WHERE d.event_id = u2.event_id AND d.subscriber_id = u2.subscriber_id"
    " AND d.status = 'inflight' AND d.owner = $4",
    "dead": "UPDATE journal_deliveries d SET status = 'dead', owner = NULL, error = u2.error,"
    " updated_at = $3 FROM unnest($1::bigint[], $2::text[], $5::double precision[], $6::text[])"
    " AS u2(event_id, subscriber_id, next_at, error)"
    " WHERE d.event_id = u2.event_id AND d.subscriber_id = u2.subscriber_id"
    " AND d.status = 'inflight' AND d.owner = $4",
    "released": "UPDATE journal_deliveries d SET status = 'pending', owner = NULL,"
    f" attempt = greatest(d.attempt - 1, 0), next_at = 0, updated_at = $3 {_MATCH}"
    " AND d.owner = $4",
}
_CLAIM_SELECT = """
SELECT d.event_id, d.attempt, d.recovered
FROM journal_deliveries d
WHERE d.subscriber_id = $1 AND d.status = 'pending' AND d.next_at <= $2
ORDER BY d.event_id
LIMIT $3
FOR UPDATE SKIP LOCKED
"""
_CLAIM_TAKE = """
UPDATE journal_deliveries d
SET status = 'inflight', attempt = d.attempt + 1, recovered = false, owner = $3, updated_at = $4
FROM journal_events e
WHERE d.subscriber_id = $1 AND d.event_id = ANY($2::bigint[]) AND e.id = d.event_id
RETURNING d.event_id, d.attempt, e.topic, e.source, e.payload, e.correlation_id, e.created_at
"""


@dataclass(slots=True)
class FanoutState:
    """The highest event id already fanned out to this process's active subscribers."""

    last_id: int = 0


def notify_payload(owner: str, topics: Iterable[str] | None) -> str:
    """What ``NOTIFY`` carries: the sender (so it can ignore itself) and the topics
    written (``null``: anything may have changed, every subscriber should look)."""
    listed = None if topics is None else sorted(set(topics))
    text = json.dumps({"from": owner, "topics": listed})
    if len(text.encode()) > _NOTIFY_MAX:
        text = json.dumps({"from": owner, "topics": None})
    return text


async def apply_batch(conn: Any, state: FanoutState, batch: WriteBatch, owner: str) -> BatchResult:
    """Apply ``batch`` in one transaction on ``conn``; on any error nothing is kept."""
    start_id = state.last_id
    try:
        async with conn.transaction():
            return await _apply(conn, state, batch, owner)
    except BaseException:
        state.last_id = start_id
        raise


async def _apply(conn: Any, state: FanoutState, batch: WriteBatch, owner: str) -> BatchResult:
    start_id = state.last_id
    result = BatchResult(event_ids=[], claims={}, queued=set(), next_retry_at={})
    if batch.events or batch.registrations:
        await conn.execute("SELECT pg_advisory_xact_lock($1)", EVENTS_LOCK)
    await _fan_out_foreign(conn, state, batch, result)
    for reg in batch.registrations:
        await _register(conn, state, reg, batch.now, result)
    topics = await _insert_events(conn, state, batch.events, batch.now, owner, result)
    await _apply_outcomes(conn, batch.outcomes, batch.now, owner, result)
    for claim in batch.claims:
        result.claims[claim.subscriber_id] = await _claim(conn, claim, batch.now, owner)
    if state.last_id != start_id or batch.registrations:
        ids = sorted(set(batch.active) | {reg.subscriber_id for reg in batch.registrations})
        await conn.execute(
            "UPDATE journal_subscribers SET cursor = greatest(cursor, $1) WHERE id = ANY($2)",
            state.last_id,
            ids,
        )
    if topics:
        payload = notify_payload(owner, topics)
        await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, payload)
    return result


async def _fan_out_foreign(
    conn: Any, state: FanoutState, batch: WriteBatch, result: BatchResult
) -> None:
    """Give active subscribers the events other processes committed since our last batch."""
    if not batch.active:
        head = await conn.fetchval("SELECT max(id) FROM journal_events")
        state.last_id = max(state.last_id, head or 0)
        return
    rows = await conn.fetch(
        "SELECT id, topic FROM journal_events WHERE id > $1 ORDER BY id", state.last_id
    )
    if rows:
        pairs = [(int(r["id"]), str(r["topic"])) for r in rows]
        await _queue_matching(conn, pairs, batch.active.items(), batch.now, result)
        state.last_id = pairs[-1][0]


async def _queue_matching(
    conn: Any,
    rows: Iterable[tuple[int, str]],
    subscribers: Iterable[tuple[str, str]],
    now: float,
    result: BatchResult,
) -> None:
    subs = list(subscribers)
    wanted = []
    for event_id, topic in rows:
        for sid, pattern in subs:
            if topic_matches(pattern, topic):
                wanted.append((event_id, sid))
                result.queued.add(sid)
    await _insert_deliveries(conn, [(eid, sid, "pending", 0, None) for eid, sid in wanted], now)


async def _insert_deliveries(
    conn: Any, rows: list[tuple[int, str, str, int, str | None]], now: float
) -> None:
    """Insert delivery rows in key order (concurrent inserters never deadlock)."""
    if not rows:
        return
    rows.sort(key=lambda row: (row[0], row[1]))
    columns = list(zip(*rows, strict=True))
    await conn.execute(_INSERT_DELIVERIES, *(list(c) for c in columns), now)


async def _register(
    conn: Any, state: FanoutState, reg: Registration, now: float, result: BatchResult
) -> None:
    """New subscriber: cursor at the head. Known one: catch up from its cursor.

    Deliveries a dead process held are taken back by the liveness round
    (``pg_liveness``), which ran when this process opened the journal.
    """
    cursor = await conn.fetchval(
        "SELECT cursor FROM journal_subscribers WHERE id = $1", reg.subscriber_id
    )
    if cursor is None:
        await conn.execute(
            "INSERT INTO journal_subscribers (id, pattern, cursor, max_attempts, last_seen)"
            " VALUES ($1, $2, $3, $4, $5)",
            reg.subscriber_id,
            reg.pattern,
            state.last_id,
            reg.max_attempts,
            now,
        )
        return
    missed = await conn.fetch(
        "SELECT id, topic FROM journal_events WHERE id > $1 AND id <= $2 ORDER BY id",
        cursor,
        state.last_id,
    )
    pairs = [(int(r["id"]), str(r["topic"])) for r in missed]
    await _queue_matching(conn, pairs, [(reg.subscriber_id, reg.pattern)], now, result)
    await conn.execute(
        "UPDATE journal_subscribers SET pattern = $2, cursor = greatest(cursor, $3),"
        " max_attempts = $4, last_seen = $5 WHERE id = $1",
        reg.subscriber_id,
        reg.pattern,
        state.last_id,
        reg.max_attempts,
        now,
    )
    pending = await conn.fetchval(
        "SELECT 1 FROM journal_deliveries WHERE subscriber_id = $1 AND status = 'pending' LIMIT 1",
        reg.subscriber_id,
    )
    if pending:
        result.queued.add(reg.subscriber_id)


async def _insert_events(
    conn: Any,
    state: FanoutState,
    events: list[NewEvent],
    now: float,
    owner: str,
    result: BatchResult,
) -> list[str]:
    """Insert the batch's events (a repeated idempotency key stores nothing) and their
    deliveries; returns the topics stored. Runs under ``EVENTS_LOCK``, so the ids
    drawn here are above every committed one and no other process inserts meanwhile."""
    if not events:
        return []
    keys = [ev.idempotency_key for ev in events if ev.idempotency_key is not None]
    known: dict[str, int] = {}
    if keys:
        rows = await conn.fetch(
            "SELECT idempotency_key, id FROM journal_events WHERE idempotency_key = ANY($1)", keys
        )
        known = {str(r["idempotency_key"]): int(r["id"]) for r in rows}
    fresh: list[NewEvent] = []
    for ev in events:
        key = ev.idempotency_key
        if key is None or (key not in known and all(key != f.idempotency_key for f in fresh)):
            fresh.append(ev)
    ids: list[int] = []
    if fresh:
        drawn = await conn.fetch(
            "SELECT nextval('journal_event_ids') AS id FROM generate_series(1, $1)", len(fresh)
        )
        ids = sorted(int(r["id"]) for r in drawn)
        columns = [
            ids,
            [ev.topic for ev in fresh],
            [ev.source for ev in fresh],
            [ev.payload_json for ev in fresh],
            [ev.correlation_id for ev in fresh],
            [ev.idempotency_key for ev in fresh],
            [ev.created_at for ev in fresh],
        ]
        await conn.execute(_INSERT_EVENTS, *columns)
        state.last_id = max(state.last_id, ids[-1])
    stored = dict(zip((id(ev) for ev in fresh), ids, strict=True))
    deliveries: list[tuple[int, str, str, int, str | None]] = []
    for ev in events:
        event_id = stored.get(id(ev))
        if event_id is None:  # a duplicate key: the first event's id, nothing stored
            key = ev.idempotency_key
            assert key is not None
            first = known.get(key)
            if first is None:
                first = next(i for f, i in zip(fresh, ids, strict=True) if f.idempotency_key == key)
            result.event_ids.append((first, False))
            continue
        result.event_ids.append((event_id, True))
        deliveries.extend((event_id, sid, "inflight", 1, owner) for sid in ev.claimed_by)
        deliveries.extend((event_id, sid, "pending", 0, None) for sid in ev.queued_for)
        result.queued.update(ev.queued_for)
    await _insert_deliveries(conn, deliveries, now)
    return [ev.topic for ev in fresh]


async def _apply_outcomes(
    conn: Any, outcomes: list[Outcome], now: float, owner: str, result: BatchResult
) -> None:
    by_status: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_status.setdefault(o.status, []).append(o)
        if o.status == "retry":
            earliest = result.next_retry_at.get(o.subscriber_id, o.next_at)
            result.next_retry_at[o.subscriber_id] = min(earliest, o.next_at)
    for status, group in by_status.items():
        group.sort(key=lambda o: (o.event_id, o.subscriber_id))
        args: list[Any] = [
            [o.event_id for o in group],
            [o.subscriber_id for o in group],
            now,
        ]
        if status != "done":
            args.append(owner)
        if status in ("retry", "dead"):
            args += [[o.next_at for o in group], [o.error for o in group]]
        await conn.execute(_OUTCOME_SQL[status], *args)


async def _claim(conn: Any, req: ClaimRequest, now: float, owner: str) -> ClaimResult:
    rows = await conn.fetch(_CLAIM_SELECT, req.subscriber_id, now, req.limit)
    taken: list[int] = []
    blocked = solo = False
    for row in rows:
        if row["recovered"]:  # its process died while handling it; run it alone
            if not taken and req.alone:
                taken.append(int(row["event_id"]))
                solo = True
            else:
                blocked = not taken
            break
        taken.append(int(row["event_id"]))
    events: list[Event] = []
    if taken:
        claimed = await conn.fetch(_CLAIM_TAKE, req.subscriber_id, taken, owner, now)
        claimed = sorted(claimed, key=lambda r: int(r["event_id"]))
        events = [
            Event(
                id=int(r["event_id"]),
                topic=r["topic"],
                source=r["source"],
                payload=decode_payload(r["payload"]),
                correlation_id=r["correlation_id"],
                created_at=float(r["created_at"]),
                attempt=int(r["attempt"]),
            )
            for r in claimed
        ]
    exhausted = len(rows) < req.limit and len(taken) == len(rows)
    return ClaimResult(events=events, exhausted=exhausted, blocked=blocked, solo=solo)
