"""The scheduler extension's store, operations and fire loop, with an injected
clock and a real event bus (idempotent publish is what makes fires exactly-once)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from core.config import StorageSettings
from core.events import EventBus, SQLiteJournal
from core.extensions.sdk import PostgresTarget
from sandbox.extensions.scheduler.firing import FireLoop, plan_fire
from sandbox.extensions.scheduler.model import ScheduleError, Timing
from sandbox.extensions.scheduler.scheduler import Scheduler
from sandbox.extensions.scheduler.store import ScheduleStore
from support.harness import wait_for
from support.scheduler_helpers import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


class Env:
    def __init__(self, tmp_path, clock, postgres: PostgresTarget | None = None):
        self.bus = EventBus(SQLiteJournal(tmp_path / "events.db"))
        self.delivered: list[tuple[str, dict]] = []
        self.postgres = postgres
        self.store = ScheduleStore(tmp_path / "scheduler" / "schedules.db", postgres=postgres)
        self.clock = clock
        self.loop = FireLoop(self.store, self.emit, clock, grace_s=60)
        self.scheduler = Scheduler(self.store, "Europe/Berlin", clock, self.loop.wake)

    async def emit(self, topic, payload, key):
        return await self.bus.publish(topic, "scheduler", payload, idempotency_key=key)

    async def on_event(self, event):
        self.delivered.append((event.topic, event.payload))

    def texts(self):
        return [p.get("text") or p.get("prompt") for _, p in self.delivered]


@pytest.fixture
async def env(tmp_path, storage_backend):
    storage = StorageSettings.model_validate(storage_backend)
    target = (
        None if storage.postgres_dsn is None else PostgresTarget(storage.postgres_dsn, "scheduler")
    )
    env = Env(tmp_path, FakeClock(berlin(2024, 5, 10, 8, 0)), target)
    env.bus.subscribe("reminder.due", env.on_event, "test.reminders")
    env.bus.subscribe("system.agent.task", env.on_event, "test.agent")
    await env.bus.start()
    await env.store.open()
    yield env
    await env.store.close()
    await env.bus.stop()


async def test_one_shot_fires_once_at_its_due_time(env):
    s = await env.scheduler.add(Timing.once(env.clock() + timedelta(minutes=20)), "call Anna")
    env.clock.advance(minutes=19, seconds=59)
    assert await env.loop.fire_due() == []
    env.clock.advance(seconds=1)
    [fire] = await env.loop.fire_due()
    assert fire.key == f"scheduler:{s.id}:{s.next_due.isoformat()}"
    env.clock.advance(hours=1)
    assert await env.loop.fire_due() == []
    await wait_for(lambda: env.delivered)
    topic, payload = env.delivered[0]
    assert topic == "reminder.due"
    assert payload == {
        "text": "⏰ Reminder: call Anna",
        "reminder": "call Anna",
        "channel_id": None,
        "schedule_id": s.id,
        "due": s.next_due.isoformat(),
        "late": False,
    }
    assert (await env.store.get(s.id)).status == "done"
    assert await env.scheduler.list() == []


async def test_recurring_catches_up_at_most_once_then_follows_its_cron(env):
    s = await env.scheduler.add(Timing.on_cron("0 9 * * *"), "plan the day")
    assert s.next_due == berlin(2024, 5, 10, 9, 0)
    env.clock.set(berlin(2024, 5, 13, 12, 0))  # down for three days
    fired = await env.loop.fire_due()
    assert len(fired) == 1
    assert fired[0].payload["text"] == "⏰ Reminder: plan the day (due 2024-05-10 09:00, late)"
    assert fired[0].payload["late"] is True
    assert await env.loop.fire_due() == []
    [current] = await env.scheduler.list()
    assert current.next_due == berlin(2024, 5, 14, 9, 0)
    env.clock.set(berlin(2024, 5, 14, 9, 0, 30))
    [on_time] = await env.loop.fire_due()
    assert on_time.payload["text"] == "⏰ Reminder: plan the day"


async def test_late_mark_shows_the_clock_time_on_the_same_day(env):
    await env.scheduler.add(Timing.once(berlin(2024, 5, 10, 9, 0)), "stand-up")
    env.clock.set(berlin(2024, 5, 10, 9, 5))
    [fire] = await env.loop.fire_due()
    assert fire.payload["text"] == "⏰ Reminder: stand-up (due 09:00, late)"


async def test_dst_daily_fires_once_on_fall_back_and_at_gap_end_on_spring_forward(env):
    async def fires_over(day_start: datetime) -> list[datetime]:
        env.clock.set(day_start)
        got = []
        for _ in range(24 * 6):  # every 10 minutes through the day
            got += [f.due for f in await env.loop.fire_due()]
            env.clock.advance(minutes=10)
        return got

    env.clock.set(berlin(2024, 10, 26, 12, 0))
    await env.scheduler.add(Timing.on_cron("30 2 * * *"), "backup")
    fall_back = await fires_over(berlin(2024, 10, 27, 0, 0))
    assert [d.astimezone(BERLIN).isoformat() for d in fall_back] == ["2024-10-27T02:30:00+02:00"]

    env.clock.set(berlin(2025, 3, 29, 12, 0))
    [old] = await env.scheduler.list()
    await env.scheduler.update(old.id, timing=Timing.on_cron("30 2 * * *"))
    spring = await fires_over(berlin(2025, 3, 30, 0, 0))
    assert [d.astimezone(BERLIN).isoformat() for d in spring] == ["2025-03-30T03:00:00+02:00"]


async def test_cancel_stops_a_schedule(env):
    s = await env.scheduler.add(Timing.every(600), "drink water")
    cancelled = await env.scheduler.cancel(s.id)
    assert cancelled.text == "drink water"
    env.clock.advance(hours=2)
    assert await env.loop.fire_due() == []
    with pytest.raises(ScheduleError, match="cancelled already"):
        await env.scheduler.cancel(s.id)
    with pytest.raises(ScheduleError, match="there is no reminder #99"):
        await env.scheduler.cancel(99)


async def test_update_moves_the_time_and_changes_the_text(env):
    s = await env.scheduler.add(Timing.once(berlin(2024, 5, 10, 9, 0)), "call Anna")
    await env.scheduler.update(
        s.id, text="call Anna back", timing=Timing.once(berlin(2024, 5, 10, 10, 0))
    )
    env.clock.set(berlin(2024, 5, 10, 9, 30))
    assert await env.loop.fire_due() == []
    env.clock.set(berlin(2024, 5, 10, 10, 0))
    [fire] = await env.loop.fire_due()
    assert fire.payload["text"] == "⏰ Reminder: call Anna back"
    with pytest.raises(ScheduleError, match="nothing to change"):
        await env.scheduler.update(s.id)


async def test_past_times_and_bad_intervals_are_rejected(env):
    with pytest.raises(ScheduleError, match="is in the past"):
        await env.scheduler.add(Timing.once(berlin(2024, 5, 10, 7, 0)), "too late")
    with pytest.raises(ScheduleError, match="at least 1 s"):
        await env.scheduler.add(Timing.every(0), "spin")
    with pytest.raises(ScheduleError, match="text is empty"):
        await env.scheduler.add(Timing.every(60), "  ")
    assert await env.scheduler.list() == []


async def test_crash_between_publish_and_record_does_not_fire_twice(env):
    s = await env.scheduler.add(Timing.once(berlin(2024, 5, 10, 9, 0)), "once only")
    env.clock.set(berlin(2024, 5, 10, 9, 0, 1))
    # the first process published the fire, then died before recording it
    fire = plan_fire(s, env.clock(), grace_s=60)
    await env.emit(fire.topic, fire.payload, fire.key)
    # after restart the same fire is still due in the store and is published again
    [again] = await env.loop.fire_due()
    assert again.key == fire.key
    await wait_for(lambda: env.delivered)
    await asyncio.sleep(0.2)
    assert env.texts() == ["⏰ Reminder: once only"]
    assert (await env.store.get(s.id)).status == "done"


async def test_agent_schedules_ask_the_assistant(env):
    await env.scheduler.add(
        Timing.on_cron("0 8 * * *"),
        "summarise my day",
        channel_id="telegram",
        user_id="-1001",
        action="agent",
    )
    env.clock.set(berlin(2024, 5, 11, 8, 0))
    await env.loop.fire_due()
    await wait_for(lambda: env.delivered)
    assert env.delivered == [
        (
            "system.agent.task",
            {"prompt": "summarise my day", "channel_id": "telegram", "user_id": "-1001"},
        )
    ]


async def test_loop_sleeps_until_due_and_wakes_when_schedules_change(tmp_path):
    env = Env(tmp_path, lambda: datetime.now(UTC))
    env.bus.subscribe("reminder.due", env.on_event, "test.reminders")
    await env.bus.start()
    await env.store.open()
    runner = asyncio.create_task(env.loop.run())
    try:
        await asyncio.sleep(0.05)  # the loop is now waiting (nothing scheduled: max_sleep_s)
        started = time.monotonic()
        await env.scheduler.add(Timing.once(env.clock() + timedelta(seconds=0.4)), "tea")
        await wait_for(lambda: env.delivered, timeout=5)
        took = time.monotonic() - started
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await env.store.close()
        await env.bus.stop()
    assert 0.35 <= took < 1.0
    assert env.texts() == ["⏰ Reminder: tea"]


async def test_store_survives_reopen(tmp_path, env):
    s = await env.scheduler.add(Timing.on_cron("0 9 * * 1-5"), "plan", channel_id="cli_channel")
    await env.store.close()
    reopened = ScheduleStore(env.store.path, postgres=env.postgres)
    await reopened.open()
    try:
        [again] = await reopened.active()
    finally:
        await reopened.close()
    assert again == s
    await env.store.open()


OLD_SCHEMA = """
CREATE TABLE schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL, kind TEXT NOT NULL,
    spec TEXT NOT NULL, timezone TEXT NOT NULL, next_due REAL NOT NULL, channel_id TEXT,
    action TEXT NOT NULL, topic TEXT NOT NULL, created_at REAL NOT NULL, last_due REAL,
    fires INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT 'active'
);
"""


async def test_reminders_stored_before_user_ids_still_fire_to_the_channel_default(tmp_path):
    """Migration: a store from before reminders recorded who set them gains the
    column; its rows fire with no ``user_id`` (the channel's default target)."""
    path = tmp_path / "schedules.db"
    due = datetime(2024, 5, 10, 9, 0, tzinfo=UTC)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(OLD_SCHEMA)
        conn.execute(
            "INSERT INTO schedules (text, kind, spec, timezone, next_due, channel_id, action,"
            " topic, created_at) VALUES ('old tea', 'once', '', 'UTC', ?, 'telegram_channel',"
            " 'notify', 'reminder.due', ?)",
            (due.timestamp(), due.timestamp() - 60),
        )
    store = ScheduleStore(path)
    await store.open()
    try:
        [old] = await store.active()
        clock = FakeClock(due - timedelta(minutes=1))
        scheduler = Scheduler(store, "UTC", clock, lambda: None)
        new = await scheduler.add(
            Timing.once(due), "new tea", channel_id="telegram_channel", user_id="42"
        )
    finally:
        await store.close()
    assert (old.text, old.user_id, new.user_id) == ("old tea", None, "42")
    old_fire, new_fire = plan_fire(old, due, 60), plan_fire(new, due, 60)
    assert "user_id" not in old_fire.payload
    assert new_fire.payload["user_id"] == "42"
    assert new_fire.payload["channel_id"] == "telegram_channel"
