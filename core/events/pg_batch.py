"""The PostgreSQL side of a group commit: one transaction per ``WriteBatch``.

The same steps as ``sqlite_batch`` (registrations, events, outcomes,
claims) with what several processes sharing one database need:

- **fan-out at publish**: the publishing batch creates the deliveries of
  every subscriber the database knows (``journal_subscribers``), this
  process's and the others' alike; no process re-reads the events others
  wrote, so processes sharing a subscriber never contend for the same new
  rows. Batches that insert events or register subscribers hold
  ``EVENTS_LOCK`` until they commit, so a subscriber registered before a
  publish gets its delivery and one registered after it does not;
- **claims** take rows ``FOR UPDATE SKIP LOCKED`` and stamp them with this
  process as ``owner``;
- a batch that left deliveries pending sends ``NOTIFY`` with their topics,
  delivered to the other processes when it commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
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

__all__ = ["apply_batch", "notify_payload"]

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


def notify_payload(owner: str, topics: Iterable[str] | None) -> str:
    """What ``NOTIFY`` carries: the sender (so it can ignore itself) and the topics
    written (``null``: anything may have changed, every subscriber should look)."""
    listed = None if topics is None else sorted(set(topics))
    text = json.dumps({"from": owner, "topics": listed})
    if len(text.encode()) > _NOTIFY_MAX:
        text = json.dumps({"from": owner, "topics": None})
    return text


async def apply_batch(conn: Any, batch: WriteBatch, owner: str) -> BatchResult:
    """Apply ``batch`` in one transaction on ``conn``; on any error nothing is kept."""
    async with conn.transaction():
        result = BatchResult(event_ids=[], claims={}, queued=set(), next_retry_at={})
        if batch.events or batch.registrations:
            await conn.execute("SELECT pg_advisory_xact_lock($1)", EVENTS_LOCK)
        else:
            # Claims and acks need no flush to disk before we go on: one lost to a
            # server crash is delivered again (at least once). Publishes wait for it.
            await conn.execute("SET LOCAL synchronous_commit = off")
        for reg in batch.registrations:
            await _register(conn, reg, batch.now, result)
        topics = await _insert_events(conn, batch.events, batch.now, owner, result)
        await _apply_outcomes(conn, batch.outcomes, batch.now, owner, result)
        for claim in batch.claims:
            result.claims[claim.subscriber_id] = await _claim(conn, claim, batch.now, owner)
        if topics:
            payload = notify_payload(owner, topics)
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, payload)
        return result


async def _insert_deliveries(
    conn: Any, rows: list[tuple[int, str, str, int, str | None]], now: float
) -> None:
    """Insert delivery rows in key order (concurrent inserters never deadlock)."""
    if not rows:
        return
    rows.sort(key=lambda row: (row[0], row[1]))
    columns = list(zip(*rows, strict=True))
    await conn.execute(_INSERT_DELIVERIES, *(list(c) for c in columns), now)


async def _register(conn: Any, reg: Registration, now: float, result: BatchResult) -> None:
    """Record (or refresh) the subscriber: from now on every publish, in any process,
    creates its deliveries. A known one finds what was published while it was away
    already pending; deliveries a dead process held are taken back by the liveness
    round (``pg_liveness``), which ran when this process opened the journal. A declared
    one (subscribed in another process) is created or seen, its settings left alone."""
    if reg.declared:
        await conn.execute(
            "INSERT INTO journal_subscribers (id, pattern, max_attempts, last_seen)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE"
            " SET last_seen = greatest(journal_subscribers.last_seen, $4)",
            reg.subscriber_id,
            reg.pattern,
            reg.max_attempts,
            now,
        )
        return
    await conn.execute(
        "INSERT INTO journal_subscribers (id, pattern, max_attempts, last_seen)"
        " VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE"
        " SET pattern = $2, max_attempts = $3, last_seen = $4",
        reg.subscriber_id,
        reg.pattern,
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
    events: list[NewEvent],
    now: float,
    owner: str,
    result: BatchResult,
) -> list[str]:
    """Insert the batch's events (a repeated idempotency key stores nothing) and the
    deliveries of every known subscriber whose pattern matches: this process's as the
    writer decided (in flight at once, or pending), the others' pending. Returns the
    topics of events left with pending deliveries (for ``NOTIFY``). Runs under
    ``EVENTS_LOCK``: ids drawn here are above every committed one, and the set of
    subscribers cannot change meanwhile."""
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
    known_subscribers = [
        (str(r["id"]), str(r["pattern"]))
        for r in await conn.fetch("SELECT id, pattern FROM journal_subscribers")
    ]
    waiting: set[str] = set()
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
        local = {*ev.claimed_by, *ev.queued_for}
        pending = [*ev.queued_for]
        pending += [
            sid
            for sid, pattern in known_subscribers
            if sid not in local and topic_matches(pattern, ev.topic)
        ]
        deliveries.extend((event_id, sid, "pending", 0, None) for sid in pending)
        result.queued.update(ev.queued_for)
        if pending:
            waiting.add(ev.topic)
    await _insert_deliveries(conn, deliveries, now)
    return sorted(waiting)


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
