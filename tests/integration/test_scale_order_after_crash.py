"""A conversation's messages are answered in the order the user wrote them even when a
worker dies mid-turn (issue 34, ADR 0039): the soak's interleaving, deterministically.

Worker W1 is running ``m20`` when it dies; W2 (and W3) already hold ``m21`` (and
``m22``) of the same conversation, waiting for their turn. ``m20`` is taken back
(``recovered``); the later turns give their claims back, ``m20`` runs first, and
nobody stalls. Each worker is an ``EventBus`` on its own ``PostgresJournal`` (its
own process id in the database) with the router's order check
(``ConversationLocks``); W1 is only a row in ``journal_processes``.
"""

from __future__ import annotations

import asyncio
import json
import time

import asyncpg

from core.events import EventBus
from core.events.models import Event
from core.events.pg_journal import PostgresJournal
from core.events.pg_liveness import liveness_round
from core.kernel.scale.placement import ROUTER_SUBSCRIBER
from core.kernel.scale.turn_lock import ConversationLocks
from core.storage import open_pool

LEASE_S = 30.0  # W1 is declared dead by the test, not by its lease
DEAD_WORKER = "w1-killed"


class Worker:
    """A worker process's router in miniature: each message's turn, in its order."""

    def __init__(self, dsn: str, pool, answered: list[str], entered: list[str]) -> None:
        local: dict[str, asyncio.Lock] = {}
        self.locks = ConversationLocks(lambda k: local.setdefault(k, asyncio.Lock()), pool, dsn)
        self.bus = EventBus(PostgresJournal(dsn, lease_s=LEASE_S), retry_base_s=0.05)
        self.answered, self.entered = answered, entered
        self.bus.subscribe("user.message", self.turn, ROUTER_SUBSCRIBER, concurrency=4)

    async def turn(self, event: Event) -> None:
        text, user = str(event.payload["text"]), str(event.payload["user_id"])
        self.entered.append(text)
        async with self.locks.hold(f"chan:{user}", (event.id, "chan", user)):
            self.answered.append(text)

    async def stop(self) -> None:
        await self.bus.stop()
        await self.locks.aclose()


async def _message(conn, text: str, *, held_by: str | None = None) -> int:
    """Journal ``text`` from u0 with the router's delivery pending, or in flight in
    ``held_by``; other processes are told (as a publishing process would)."""
    payload = json.dumps({"text": text, "user_id": "u0", "channel_id": "chan"})
    event_id = await conn.fetchval(
        "INSERT INTO journal_events (id, topic, source, payload, created_at)"
        " VALUES (nextval('journal_event_ids'), 'user.message', 'chan', $1, $2) RETURNING id",
        payload,
        time.time(),
    )
    await conn.execute(
        "INSERT INTO journal_deliveries (event_id, subscriber_id, status, attempt, owner,"
        " updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
        event_id,
        ROUTER_SUBSCRIBER,
        "inflight" if held_by else "pending",
        1 if held_by else 0,
        held_by,
        time.time(),
    )
    await conn.execute('NOTIFY hearth_journal, \'{"from": "test", "topics": null}\'')
    return int(event_id)


async def _until(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.02)


async def test_a_turn_taken_back_from_a_dead_worker_runs_before_the_later_ones(postgres_dsn):
    setup = PostgresJournal(postgres_dsn)
    await setup.open()  # the schema, as the first kernel would create it
    await setup.close()
    conn = await asyncpg.connect(postgres_dsn)
    pool = await open_pool(postgres_dsn)
    answered: list[str] = []
    entered: list[str] = []
    workers: list[Worker] = []
    try:
        await conn.execute(
            "INSERT INTO journal_subscribers (id, pattern, last_seen) VALUES ($1, $2, $3)",
            ROUTER_SUBSCRIBER,
            "user.message",
            time.time(),
        )
        await conn.execute(  # W1: alive on another host, running m20
            "INSERT INTO journal_processes (id, host, pid, started_at, heartbeat_at)"
            " VALUES ($1, 'other-host', 1, $2, $2)",
            DEAD_WORKER,
            time.time(),
        )
        await _message(conn, "m20", held_by=DEAD_WORKER)
        await _message(conn, "m21")
        workers.append(Worker(postgres_dsn, pool, answered, entered))
        await workers[0].bus.start()
        await _until(lambda: _true(entered == ["m21"]), "W2 holds m21, waiting for m20")
        await _message(conn, "m22")
        workers.append(Worker(postgres_dsn, pool, answered, entered))
        await workers[1].bus.start()
        await _until(lambda: _true(sorted(entered) == ["m21", "m22"]), "W3 holds m22")
        await asyncio.sleep(0.3)
        assert answered == []  # both wait for m20, still running in W1

        await conn.execute("DELETE FROM journal_processes WHERE id = $1", DEAD_WORKER)  # killed
        assert await liveness_round(conn, "w2-heartbeat", LEASE_S) == 1  # m20 taken back

        await _until(lambda: _all_done(conn), f"all answered (got {answered})")
        assert answered == ["m20", "m21", "m22"]
        rows = await conn.fetch(
            "SELECT e.payload::jsonb ->> 'text' AS text, d.status, d.attempt"
            " FROM journal_deliveries d JOIN journal_events e ON e.id = d.event_id"
            " ORDER BY e.id"
        )
        # m20 ran a second time; m21 and m22 were given back uncharged, each ran once
        assert [(r["text"], r["status"], r["attempt"]) for r in rows] == [
            ("m20", "done", 2),
            ("m21", "done", 1),
            ("m22", "done", 1),
        ]
    finally:
        for worker in workers:
            await worker.stop()
        await pool.close()
        await conn.close()


async def _true(value: bool) -> bool:
    return value


async def _all_done(conn) -> bool:
    return not await conn.fetchval("SELECT count(*) FROM journal_deliveries WHERE status <> 'done'")
