"""Lifecycle: graceful stop, release of unfinished work, retention, settings."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from core.config import EventsSettings
from core.events import Event, EventBus, SQLiteJournal
from core.events.sqlite_batch import _CLAIM_SELECT, SCHEMA
from support.bus_helpers import (
    JournalFactory,
    Recorder,
    eventually,
    wait_for,
)


async def test_stop_waits_for_running_handlers(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), stop_timeout_s=5)
    finished: list[int] = []
    started = asyncio.Event()

    async def handler(event: Event) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(event.id)

    bus.subscribe("job.*", handler, "worker")
    await bus.start()
    event_id = await bus.publish("job.run", "t", {})
    await asyncio.wait_for(started.wait(), 5)
    await bus.stop()
    assert finished == [event_id]
    assert await make_journal().counts() == {
        "pending": 0,
        "inflight": 0,
        "done": 1,
        "dead": 0,
        "events": 1,
    }


async def test_stop_cancels_late_handlers_without_counting_a_failure(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal(), stop_timeout_s=0.1)
    cancelled: list[int] = []
    started = asyncio.Event()

    async def hang(event: Event) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(event.id)
            raise

    bus.subscribe("job.*", hang, "worker")
    await bus.start()
    running = await bus.publish("job.run", "t", {"n": 0})
    queued = [await bus.publish("job.run", "t", {"n": n}) for n in (1, 2)]
    await asyncio.wait_for(started.wait(), 5)
    t0 = time.monotonic()
    await bus.stop()
    assert time.monotonic() - t0 < 2
    assert cancelled == [running]
    counts = await make_journal().counts()
    assert (counts["pending"], counts["dead"], counts["done"]) == (3, 0, 0)

    bus2 = EventBus(make_journal())
    rec = Recorder()
    bus2.subscribe("job.*", rec, "worker")
    await bus2.start()
    try:
        await wait_for(lambda: rec.ids == [running, *queued], what="redelivery after stop")
        assert [e.attempt for e in rec.events] == [1, 1, 1]  # a shutdown is not an attempt
    finally:
        await bus2.stop()


async def test_retention_purges_only_finished_old_events(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), max_attempts=1, stop_timeout_s=0.05)
    fail_ids: set[int] = set()

    async def handler(event: Event) -> None:
        if event.payload.get("fail"):
            raise RuntimeError("no")

    async def never(event: Event) -> None:
        await asyncio.sleep(30)

    bus.subscribe("keep.*", handler, "worker")
    bus.subscribe("stuck.*", never, "stuck")
    await bus.start()
    done = await bus.publish("keep.ok", "t", {})
    fail_ids.add(await bus.publish("keep.bad", "t", {"fail": True}))
    stuck = await bus.publish("stuck.job", "t", {})

    async def settled() -> bool:
        counts = await bus.stats()
        return counts["done"] + counts["dead"] == 2

    await eventually(settled)
    recent = await bus.publish("keep.ok", "t", {})
    await bus.stop()  # "stuck" is released: its delivery stays pending

    make_journal.age_events(864000, keep=recent)  # everything but the last is ten days old

    bus2 = EventBus(make_journal(), retention_days=7)
    await bus2.start()

    async def purged() -> set[int]:  # the purge runs beside the start, not before it
        kept = {r.id for r in await bus2.journal.recent_events(limit=10)}
        return kept if done not in kept else set()

    try:
        kept = await eventually(purged)
    finally:
        await bus2.stop()
    assert done not in kept and not (fail_ids & kept)
    assert kept == {stuck, recent}


def test_from_settings_uses_the_events_section(tmp_path: Path) -> None:
    settings = EventsSettings(synchronous="full", max_attempts=2, poll_interval_s=0.5)
    bus = EventBus.from_settings(tmp_path / "e.db", settings)
    assert isinstance(bus.journal, SQLiteJournal)
    assert bus.journal.synchronous == "full"
    assert bus.journal.path == tmp_path / "e.db"


def test_claim_query_walks_the_pending_index_in_order() -> None:
    """A sort over every pending row made claims 48x slower at a 30k backlog; keep it out."""
    with sqlite3.connect(":memory:") as db:
        db.executescript(SCHEMA)
        plan = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + _CLAIM_SELECT, ("s", 0, 9))]
    assert any("deliveries_pending" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
