"""Two and three kernel processes on one PostgreSQL database (ADR 0036): every
message answered exactly once, in order per conversation, and sent by the
process that owns the channel; a worker SIGKILLed mid-turn has its work
finished by the others."""

from __future__ import annotations

from collections import Counter

import asyncpg

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


def _check_answers(cluster: Cluster, owner_pid: int) -> None:
    """Each message answered once, by the channel's process, in order per user."""
    replies = cluster.replies()
    texts = Counter(r["text"] for r in replies)
    expected = {f"echo: {text}" for _, text in cluster.messages}
    assert set(texts) == expected and set(texts.values()) == {1}, texts
    assert {r["pid"] for r in replies} == {owner_pid}
    for user in {u for u, _ in cluster.messages}:
        sent = [r["text"] for r in replies if r["user"] == user]
        assert sent == [f"echo: {t}" for u, t in cluster.messages if u == user]


def _all_answered(cluster: Cluster) -> bool:
    return len(cluster.replies()) >= len(cluster.messages)


def test_two_processes_answer_every_message_once_from_the_channel_owner(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    with FakeOpenAIServer(delay_s=0.2) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, conversation_messages(3, 4))
        try:
            cluster.start("worker", "workers")
            cluster.wait_log("worker", READY)
            owner = cluster.start("front", "all")  # runs the channel and turns too
            wait_until(lambda: _all_answered(cluster), 120, lambda: cluster.log("front"))
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    _check_answers(cluster, owner.pid)
    # the worker did turns, and its replies were sent by the channel's process
    assert "kernel.role workers" in cluster.log("worker")


def test_three_processes_and_a_worker_killed_mid_turn(make_ext, ext_root, tmp_path, postgres_dsn):
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    with FakeOpenAIServer(delay_s=60) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, conversation_messages(4, 3))
        try:
            cluster.start("w1", "workers")
            cluster.wait_log("w1", READY)
            owner = cluster.start("front", "channels")
            srv.wait_for_requests(4, timeout_s=120)  # w1, the only worker, is in model calls
            cluster.start("w2", "workers")
            cluster.wait_log("w2", READY)
            srv.delay_s = 0.2
            cluster.kill("w1")  # mid-turn, holding every message it claimed
            wait_until(
                lambda: _all_answered(cluster),
                180,
                lambda: f"{cluster.replies()}\n{cluster.log('w2')[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    _check_answers(cluster, owner.pid)  # after the stop: nothing was sent twice meanwhile
    # w1's turns were taken back and run again by w2 (a second attempt)
    retried = run_sync(lambda: _router_attempts_over_one(postgres_dsn))
    assert retried >= 1


async def _router_attempts_over_one(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM journal_deliveries"
                " WHERE subscriber_id = 'kernel.router' AND attempt > 1 AND status = 'done'"
            )
        )
    finally:
        await conn.close()
