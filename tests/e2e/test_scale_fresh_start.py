"""A fresh PostgreSQL database, the channels kernel up before any worker (issue 34,
ADR 0039): ``systemctl enable --now hearth-channels hearth-workers`` starts both at
once, and what users write before the first worker has started must be answered.
Then the retention purge: a subscriber nobody has seen for a while stops receiving,
but what was already published to it waits for it."""

from __future__ import annotations

import time

import asyncpg

from core.events import EventBus
from core.events.pg_journal import PostgresJournal
from support.fake_openai import FakeOpenAIServer
from support.kernel_process import wait_until
from support.pg_helpers import run_sync
from support.scale_support import (
    CHANNEL,
    CHANNEL_ID,
    CHANNEL_MANIFEST,
    Cluster,
    conversation_messages,
)

READY = "kernel ready"


def test_messages_journaled_before_the_first_worker_ever_started_are_answered(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    with FakeOpenAIServer(delay_s=0.1) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, conversation_messages(1, 3))
        try:
            owner = cluster.start("front", "channels")  # alone on the fresh database
            cluster.wait_log("front", READY)
            wait_until(lambda: run_sync(lambda: _messages(postgres_dsn)) == 3, 60)
            assert cluster.replies() == []
            cluster.start("worker", "workers")
            wait_until(
                lambda: len(cluster.replies()) >= 3,
                120,
                lambda: f"{cluster.replies()}\n{cluster.log('worker')[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    replies = cluster.replies()
    assert [r["text"] for r in replies] == ["echo: m0", "echo: m1", "echo: m2"]
    assert {r["pid"] for r in replies} == {owner.pid}


async def _messages(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM journal_events WHERE topic = 'user.message'")
        )
    finally:
        await conn.close()


async def test_the_purge_keeps_declared_subscribers_and_what_waits_for_forgotten_ones(
    postgres_dsn,
):
    # a channels process: declares the router (another process subscribes it)
    channels = EventBus(PostgresJournal(postgres_dsn), retention_days=7)
    channels.declare("user.message", "kernel.router")
    await channels.start()
    conn = await asyncpg.connect(postgres_dsn)
    try:
        first = await channels.publish("user.message", "chan", _message("m0"))
        await conn.execute(  # a node last seen ten days ago, with a reply waiting for it
            "INSERT INTO journal_subscribers (id, pattern, last_seen)"
            " VALUES ('kernel.reply.gone', 'system.reply.gone', $1)",
            time.time() - 864000,
        )
        await conn.execute(
            "UPDATE journal_subscribers SET last_seen = 0 WHERE id = 'kernel.router'"
        )
        reply = await channels.publish("system.reply.gone", "kernel", {"text": "hi"})
        old = await channels.publish("system.reply.gone", "kernel", {"text": "old"})
        await conn.execute(
            "UPDATE journal_events SET created_at = $1 WHERE id = $2", time.time() - 864000, old
        )
        await channels.journal.purge(time.time() - 7 * 86400, ["kernel.router"])
        subscribers = {r["id"] for r in await conn.fetch("SELECT id FROM journal_subscribers")}
        pending = {
            (r["event_id"], r["subscriber_id"])
            for r in await conn.fetch(
                "SELECT event_id, subscriber_id FROM journal_deliveries WHERE status = 'pending'"
            )
        }
    finally:
        await conn.close()
        await channels.stop()
    assert "kernel.router" in subscribers  # declared here: kept, its messages too
    assert (first, "kernel.router") in pending
    # the gone node is forgotten; its recent reply still waits, the old one is dropped
    assert "kernel.reply.gone" not in subscribers
    assert (reply, "kernel.reply.gone") in pending
    assert (old, "kernel.reply.gone") not in pending


def _message(text: str) -> dict[str, str]:
    return {"text": text, "user_id": "u0", "channel_id": "chan"}
