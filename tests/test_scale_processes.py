"""Two and three kernel processes on one PostgreSQL database (ADR 0036): every
message answered exactly once, in order per conversation, and sent by the
process that owns the channel; a worker SIGKILLed mid-turn has its work
finished by the others."""

from __future__ import annotations

from collections import Counter

from fake_openai import FakeOpenAIServer
from scale_support import (
    CHANNEL,
    CHANNEL_ID,
    CHANNEL_MANIFEST,
    Cluster,
    conversation_messages,
    wait_until,
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
    with FakeOpenAIServer(delay_s=1.0) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, conversation_messages(4, 3))
        try:
            for name in ("w1", "w2"):
                cluster.start(name, "workers")
            for name in ("w1", "w2"):
                cluster.wait_log(name, READY)
            owner = cluster.start("front", "channels")
            # both workers are in model calls: kill one of them there
            srv.wait_for_requests(3, timeout_s=120)
            cluster.kill("w1")
            wait_until(
                lambda: _all_answered(cluster),
                180,
                lambda: f"{cluster.replies()}\n{cluster.log('w2')[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    _check_answers(cluster, owner.pid)  # after the stop: nothing was sent twice meanwhile
