"""One schedule leader among processes sharing PostgreSQL (ADR 0036): the lease, the
role rule in settings, and schedulers that fire only while leading."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from conftest import ext_code
from core.config import SettingsError, load_settings
from core.extensions.contract import Leadership, TurnContext
from core.kernel.commands.table import parse_command
from core.scheduling import LEASES_COMPONENT, LeaseLeader
from core.storage import apply_migrations, open_pool
from support.harness import running_kernel

LEASE_S = 1.5


async def _leaders(dsn: str, count: int) -> tuple[object, list[LeaseLeader]]:
    pool = await open_pool(dsn, min_size=1, max_size=4)
    await apply_migrations(pool, [LEASES_COMPONENT])
    return pool, [LeaseLeader(pool, f"node{i}", LEASE_S) for i in range(count)]


async def _until(condition, deadline_s: float, step: float = 0.05) -> float:
    """Seconds until ``condition()`` held; fails after ``deadline_s``."""
    start = time.monotonic()
    while not await condition():
        if time.monotonic() - start > deadline_s:
            raise AssertionError(f"not within {deadline_s} s")
        await asyncio.sleep(step)
    return time.monotonic() - start


LEADER_PROBE = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command

        async def lead(args, turn):
            led = await self.ctx.leadership()
            return f"{led.leader} {led.recheck_s}"

        return [Command("lead", "Leadership.", lead)]
    """
)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_leadership_reaches_extensions_in_process_and_isolated(mode, make_ext, settings_file):
    make_ext("prober", LEADER_PROBE, {"isolation": mode})
    turn = TurnContext(channel_id="cli_channel", user_id="u1")
    async with running_kernel(settings_file(isolation={"call_timeout_s": 10})) as kernel:
        alone = await kernel.commands.run(parse_command("/lead"), turn)
        kernel.services.leadership = lambda: Leadership(False, 2.5)  # a follower's answer
        follower = await kernel.commands.run(parse_command("/lead"), turn)
    assert alone == "True None"  # SQLite: the only process always leads
    assert follower == "False 2.5"


def test_a_role_other_than_all_needs_postgres(tmp_path):
    path = tmp_path / "settings.yaml"
    path.write_text("kernel: {role: workers}\n")
    with pytest.raises(SettingsError, match=r"kernel.role: 'workers' needs storage.backend"):
        load_settings(path)
    path.write_text(
        "kernel: {role: channels}\n"
        "storage: {backend: postgres, postgres_dsn: 'postgresql://h@db/hearth'}\n"
    )
    assert load_settings(path).kernel.role == "channels"
    assert load_settings(path).scheduling.leader_lease_s == 15


async def test_exactly_one_leader_and_takeover_within_the_lease(postgres_dsn):
    pool, (first, second, third) = await _leaders(postgres_dsn, 3)
    try:
        assert await first.try_take()
        assert not await second.try_take() and not await third.try_take()
        tasks = [asyncio.create_task(leader.run()) for leader in (second, third)]
        # the leader dies: it stops renewing without giving the lease up
        died = time.monotonic()
        overlap = []

        async def taken() -> bool:
            leading = [x for x in (first, second, third) if x.leading]
            if len(leading) > 1:
                overlap.append([x.holder for x in leading])
            return any(x.leading for x in (second, third))

        await _until(taken, LEASE_S * 4)
        took = time.monotonic() - died
        assert took <= LEASE_S * 3, took  # the lease, one renew interval, a loaded machine
        assert not first.leading and overlap == []
        assert sum(x.leading for x in (second, third)) == 1
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await pool.close()


async def test_a_clean_stop_hands_the_lease_over_at_once(postgres_dsn):
    pool, (first, second) = await _leaders(postgres_dsn, 2)
    try:
        assert await first.try_take()
        assert not await second.try_take()
        await first.give_up()
        assert not first.leading
        assert await second.try_take()
        assert second.leadership() == Leadership(True, LEASE_S / 3)
    finally:
        await pool.close()


async def test_the_scheduler_extension_fires_only_while_leading(tmp_path):
    from core.extensions.sdk.testing import FakeContext, running
    from sandbox.extensions.scheduler.main import SchedulerExtension

    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    now = [start]
    ctx = FakeContext(tmp_path, extension_id="scheduler", leading=Leadership(False, 0.5))
    ext = SchedulerExtension()
    ext.clock = lambda: now[0]
    async with running(ext, ctx, background=False):
        await ext.schedule("10s", "stretch", channel_id="cli_channel", user_id="u")
        now[0] = start + timedelta(seconds=30)
        assert ext.loop is not None
        assert await ext.loop.fire_due() == []
        assert ctx.emitted == []
        # a follower looks again within recheck_s even with nothing due for hours
        assert await ext.loop.next_due() <= now[0] + timedelta(seconds=0.5)
        ctx.leading = Leadership(True, 0.5)
        fired = await ext.loop.fire_due()
        assert [f.payload["text"] for f in fired] == ["⏰ Reminder: stretch"]
        assert [e.topic for e in ctx.emitted] == ["reminder.due"]


def test_kill_the_schedule_leader_and_reminders_fire_once_from_another(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    from support.bundled import copy_bundled
    from support.fake_openai import FakeOpenAIServer
    from support.kernel_process import wait_until
    from support.scale_support import (
        CHANNEL,
        CHANNEL_ID,
        CHANNEL_MANIFEST,
        SHORT_LEASE_S,
        Cluster,
    )

    copy_bundled(ext_root, "scheduler")
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    names = ("ping-alpha", "ping-beta", "ping-gamma")
    commands = [("u1", f"/remind {8 + i}s {name}") for i, name in enumerate(names)]
    leads = "this process leads"
    with FakeOpenAIServer() as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, commands)

        def fired(name: str) -> int:
            return sum(1 for r in cluster.replies() if r["text"] == f"⏰ Reminder: {name}")

        try:
            cluster.start("w1", "workers")
            cluster.wait_log("w1", "kernel ready")
            assert leads in cluster.log("w1")  # the first worker up takes the lease
            cluster.start("w2", "workers")
            cluster.wait_log("w2", "kernel ready")
            front = cluster.start("front", "channels")
            wait_until(lambda: len(cluster.replies()) >= len(names), 60, lambda: cluster.log("w1"))
            assert all(fired(name) == 0 for name in names)
            cluster.kill("w1")  # the leader dies before any reminder is due
            killed = time.monotonic()
            cluster.wait_log("w2", leads, timeout_s=60)
            took = time.monotonic() - killed
            wait_until(lambda: all(fired(name) for name in names), 60, lambda: cluster.log("w2"))
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert took <= SHORT_LEASE_S * 3, took  # the lease, one renew interval, a loaded machine
    assert [fired(name) for name in names] == [1, 1, 1]
    assert {r["pid"] for r in cluster.replies()} == {front.pid}


async def test_manifest_schedules_fire_on_the_leader_and_once_after_a_takeover(tmp_path):
    from zoneinfo import ZoneInfo

    from core.events import EventBus, SQLiteJournal
    from core.events.topics import SystemTopics
    from core.scheduling import ManifestSchedule, ManifestScheduler
    from support.scheduler_helpers import FakeClock

    berlin = ZoneInfo("Europe/Berlin")
    clock = FakeClock(datetime(2024, 5, 10, 8, 0, tzinfo=berlin))
    morning = [ManifestSchedule("digest", "morning", "morning_digest", "0 9 * * *", berlin)]
    bus = EventBus(SQLiteJournal(tmp_path / "events.db"))  # stands for the shared journal
    leader = {"a": True}
    schedulers = {
        name: ManifestScheduler(
            bus,
            tmp_path / "schedules.db",  # the fire state both processes share
            lookup=lambda _ext: None,
            clock=clock,
            leadership=lambda name=name: Leadership(leader["a"] == (name == "a"), 1.0),
        )
        for name in ("a", "b")
    }
    await bus.start()
    try:
        for scheduler in schedulers.values():
            await scheduler.load(morning)
        clock.set(datetime(2024, 5, 10, 9, 0, tzinfo=berlin))
        assert await schedulers["b"].fire_due() == 0  # a follower never fires
        assert await schedulers["a"].fire_due() == 1
        leader["a"] = False  # a dies; b takes the lease the next morning
        clock.set(datetime(2024, 5, 11, 9, 0, 30, tzinfo=berlin))
        assert await schedulers["a"].fire_due() == 0
        assert await schedulers["b"].fire_due() == 1  # today's, not yesterday's again
        assert await schedulers["b"].fire_due() == 0
        fires = [
            e.payload["due"]
            for e in await bus.journal.recent_events(topic=SystemTopics.SCHEDULE_FIRE)
        ]
    finally:
        for scheduler in schedulers.values():
            await scheduler.stop()
        await bus.stop()
    assert sorted(fires) == [
        "2024-05-10T07:00:00+00:00",
        "2024-05-11T07:00:00+00:00",
    ]  # 9:00 Berlin
