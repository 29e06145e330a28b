"""Manifest schedules (SchedulerProvider) with an injected clock and a real bus:
first sighting, on-time fires, catch-up once after downtime, late marking,
and no double fire when a crash hit between publishing and recording."""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.events import EventBus, SQLiteJournal, SystemTopics
from core.scheduling import ManifestSchedule, ManifestScheduler
from support.harness import wait_for
from support.scheduler_helpers import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


class Digest:
    """A SchedulerProvider that counts its runs."""

    def __init__(self):
        self.runs: list[str] = []

    async def execute_task(self, task_name):
        self.runs.append(task_name)
        return {"text": f"{task_name} done"} if task_name != "quiet" else None


class Kernelish:
    """What the runner gives the scheduler: a bus, a state file, a lookup."""

    def __init__(self, tmp_path, clock):
        self.tmp_path, self.clock = tmp_path, clock
        self.digest = Digest()
        self.notes: list[str] = []

    async def start(self, schedules):
        self.bus = EventBus(SQLiteJournal(self.tmp_path / "events.db"))
        self.scheduler = ManifestScheduler(
            self.bus,
            self.tmp_path / "schedules.db",
            lookup={"digest": self.digest}.get,
            clock=self.clock,
        )
        self.scheduler.subscribe()
        self.bus.subscribe(SystemTopics.USER_NOTIFY, self._note, "test.notify")
        await self.bus.start()
        await self.scheduler.load(schedules)

    async def stop(self):
        await self.scheduler.stop()
        await self.bus.stop()

    async def _note(self, event):
        self.notes.append(event.payload["text"])


DAILY = [
    ManifestSchedule("digest", "morning", "morning_digest", "0 9 * * *", BERLIN),
    ManifestSchedule("digest", "evening", "evening_digest", "0 18 * * *", NEW_YORK),
]


@pytest.fixture
async def kernel(tmp_path):
    k = Kernelish(tmp_path, FakeClock(datetime(2024, 5, 10, 8, 0, tzinfo=BERLIN)))
    yield k
    await k.stop()


async def test_fires_on_time_in_each_schedules_timezone(kernel):
    await kernel.start(DAILY)
    assert kernel.scheduler.next_due() == datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN)
    kernel.clock.set(datetime(2024, 5, 10, 8, 59, 59, tzinfo=BERLIN))
    assert await kernel.scheduler.fire_due() == 0
    kernel.clock.set(datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN))
    assert await kernel.scheduler.fire_due() == 1
    kernel.clock.set(datetime(2024, 5, 10, 18, 0, tzinfo=NEW_YORK))  # 00:00 in Berlin
    assert await kernel.scheduler.fire_due() == 1
    await wait_for(lambda: len(kernel.notes) == 2)
    assert kernel.digest.runs == ["morning_digest", "evening_digest"]
    assert kernel.notes == ["morning_digest done", "evening_digest done"]


async def test_missed_fires_run_once_on_start_marked_late(kernel):
    await kernel.start(DAILY[:1])
    kernel.clock.set(datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN))
    assert await kernel.scheduler.fire_due() == 1
    await wait_for(lambda: kernel.notes)
    await kernel.stop()

    kernel.clock.set(datetime(2024, 5, 13, 12, 0, tzinfo=BERLIN))  # down for three days
    await kernel.start(DAILY[:1])
    assert await kernel.scheduler.fire_due() == 1
    assert await kernel.scheduler.fire_due() == 0
    assert kernel.scheduler.next_due() == datetime(2024, 5, 14, 9, 0, tzinfo=BERLIN)
    await wait_for(lambda: len(kernel.notes) == 2)
    assert kernel.notes[1] == "morning_digest done (late: due 2024-05-11 09:00)"


async def test_a_new_schedule_does_not_fire_for_the_past(kernel):
    kernel.clock.set(datetime(2024, 5, 10, 12, 0, tzinfo=BERLIN))
    await kernel.start(DAILY[:1])
    assert await kernel.scheduler.fire_due() == 0
    assert kernel.scheduler.next_due() == datetime(2024, 5, 11, 9, 0, tzinfo=BERLIN)


async def test_crash_after_publish_before_record_runs_the_task_once(kernel):
    await kernel.start(DAILY[:1])
    due = datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN)
    kernel.clock.set(due)
    # what the dead process managed to publish before it could record the fire
    await kernel.bus.publish(
        "system.schedule.fire",
        "kernel.scheduler",
        {
            "extension_id": "digest",
            "schedule": "morning",
            "task": "morning_digest",
            "due": due.isoformat(),
            "late_note": "",
        },
        idempotency_key=f"manifest:digest:morning:{due.astimezone(ZoneInfo('UTC')).isoformat()}",
    )
    assert await kernel.scheduler.fire_due() == 1  # published again: a no-op for the bus
    await wait_for(lambda: kernel.notes)
    await asyncio.sleep(0.2)
    assert kernel.digest.runs == ["morning_digest"]


async def test_a_task_without_text_notifies_nobody(kernel):
    await kernel.start([ManifestSchedule("digest", "q", "quiet", "0 9 * * *", BERLIN)])
    kernel.clock.set(datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN))
    assert await kernel.scheduler.fire_due() == 1
    await wait_for(lambda: kernel.digest.runs)
    await asyncio.sleep(0.1)
    assert kernel.notes == []


async def test_a_cron_that_never_fires_is_skipped_and_the_rest_still_run(kernel, caplog):
    never = ManifestSchedule("digest", "never", "never", "0 9 31 2 *", BERLIN)  # 31 February
    await kernel.start([never, DAILY[0]])
    assert kernel.scheduler.next_due() == datetime(2024, 5, 10, 9, 0, tzinfo=BERLIN)
    assert "schedule 'never' of digest will not fire" in caplog.text
