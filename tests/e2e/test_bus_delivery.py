"""Delivery: durable subscriptions, retries, dead letters, ordering, concurrency, latency."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from core.events import Event, EventBus
from core.events.errors import DeliveryDeferred
from support.bus_helpers import (
    JournalFactory,
    Recorder,
    eventually,
    wait_for,
)


async def test_known_subscriber_gets_events_published_while_it_was_away(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal())
    first = Recorder()
    bus.subscribe("mail.*", first, "mailer")
    await bus.start()
    seen = await bus.publish("mail.in", "t", {"n": 0})
    await wait_for(lambda: first.ids == [seen])
    await bus.stop()

    # "mailer" is down; another process (no subscriber of its own) keeps publishing.
    other = EventBus(make_journal())
    await other.start()
    missed = [await other.publish("mail.in", "t", {"n": n}) for n in (1, 2)]
    await other.publish("chat.in", "t", {})
    await other.stop()

    bus2 = EventBus(make_journal())
    again, fresh = Recorder(), Recorder()
    bus2.subscribe("mail.*", again, "mailer")
    await bus2.start()
    try:
        await wait_for(lambda: again.ids == missed, what="missed events")
        later = await bus2.publish("mail.in", "t", {"n": 3})
        bus2.subscribe("mail.*", fresh, "newcomer")
        newest = await bus2.publish("mail.in", "t", {"n": 4})
        await wait_for(lambda: again.ids == [*missed, later, newest])
        await wait_for(lambda: fresh.ids == [newest], what="newcomer sees only later events")
    finally:
        await bus2.stop()


async def test_failing_handler_is_retried_with_backoff_then_succeeds(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal(), retry_base_s=0.1, max_attempts=5)
    calls: list[tuple[int, float]] = []
    ok = Recorder()

    async def flaky(event: Event) -> None:
        calls.append((event.attempt, time.monotonic()))
        if event.attempt < 3:
            raise RuntimeError(f"try {event.attempt}")

    bus.subscribe("job.*", flaky, "flaky")
    bus.subscribe("job.*", ok, "steady")
    await bus.start()
    try:
        event_id = await bus.publish("job.run", "t", {})
        await wait_for(lambda: len(calls) == 3, what="three attempts")
        await asyncio.sleep(0.3)  # would reveal a fourth call or a second call to "steady"
        assert [a for a, _ in calls] == [1, 2, 3]
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(calls)]
        assert gaps[0] >= 0.09 and gaps[1] >= 0.19, gaps  # 0.1 * 2**(attempt-1)
        assert ok.ids == [event_id]
        record = (await bus.journal.recent_events(limit=1))[0]
        assert {(d.subscriber_id, d.status, d.attempt) for d in record.deliveries} == {
            ("flaky", "done", 3),
            ("steady", "done", 1),
        }
    finally:
        await bus.stop()


async def test_dead_letter_keeps_error_and_requeue_revives_it(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), retry_base_s=0.01, max_attempts=2, poll_interval_s=0.1)
    broken = True
    done: list[int] = []

    async def handler(event: Event) -> None:
        if broken:
            raise ValueError("disk full")
        done.append(event.id)

    bus.subscribe("job.*", handler, "worker")
    await bus.start()
    try:
        event_id = await bus.publish("job.run", "t", {})
        inspector = make_journal()  # as `main.py events` would, from outside the bus

        letters = await eventually(inspector.dead_letters)
        assert [(d.event_id, d.subscriber_id, d.attempt, d.error) for d in letters] == [
            (event_id, "worker", 2, "ValueError: disk full")
        ]
        broken = False
        assert await inspector.requeue(event_id) == 1
        assert await inspector.requeue(event_id) == 0  # no longer dead
        await wait_for(lambda: done == [event_id], what="requeued delivery handled")
        assert (await bus.stats())["dead"] == 0
    finally:
        await bus.stop()


async def test_handler_timeout_counts_as_failure(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), max_attempts=1)

    async def hang(event: Event) -> None:
        await asyncio.sleep(10)

    bus.subscribe("slow.*", hang, "hanger", timeout=0.05)
    await bus.start()
    try:
        await bus.publish("slow.op", "t", {})
        letters = await eventually(bus.journal.dead_letters)
        assert letters[0].error == "handler 'hanger' timed out after 0.05s"
    finally:
        await bus.stop()


async def test_raising_handler_does_not_stop_dispatch(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), max_attempts=1)
    seen = Recorder()

    async def bad(event: Event) -> None:
        await seen(event)
        raise KeyError("nope")

    bus.subscribe("x.*", bad, "bad")
    await bus.start()
    try:
        ids = [await bus.publish("x.y", "t", {"n": n}) for n in range(5)]
        await wait_for(lambda: seen.ids == ids)
    finally:
        await bus.stop()


async def test_events_are_handled_in_publish_order_one_at_a_time(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal())
    order: list[int] = []
    active = 0
    overlap = False

    async def handler(event: Event) -> None:
        nonlocal active, overlap
        active += 1
        overlap = overlap or active > 1
        await asyncio.sleep(0)
        order.append(event.payload["n"])
        active -= 1

    bus.subscribe("seq.*", handler, "sequential")
    await bus.start()
    try:
        await asyncio.gather(*(bus.publish("seq.n", "t", {"n": n}) for n in range(300)))
        await wait_for(lambda: len(order) == 300)
        assert order == list(range(300))
        assert not overlap
    finally:
        await bus.stop()


async def test_concurrency_n_runs_n_handlers_at_once(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal())
    release = asyncio.Event()
    active = peak = 0

    async def handler(event: Event) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await release.wait()
        active -= 1

    bus.subscribe("par.*", handler, "parallel", concurrency=3)
    await bus.start()
    try:
        for n in range(6):
            await bus.publish("par.n", "t", {"n": n})
        await wait_for(lambda: active == 3, what="three handlers running")
        await asyncio.sleep(0.05)
        assert peak == 3
        release.set()
        await wait_for(lambda: active == 0)
    finally:
        await bus.stop()
    assert (await bus.stats())["done"] == 6


async def test_slow_subscriber_does_not_delay_another(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), stop_timeout_s=0.1)
    started = asyncio.Event()
    fast = Recorder()

    async def slow(event: Event) -> None:
        started.set()
        await asyncio.sleep(30)

    bus.subscribe("work.*", slow, "agent-turn")
    bus.subscribe("work.*", fast, "logger")
    bus.subscribe("other.*", fast, "other")
    await bus.start()
    try:
        await bus.publish("work.a", "t", {})
        await asyncio.wait_for(started.wait(), 5)
        t0 = time.perf_counter()
        same_topic = await bus.publish("work.b", "t", {})
        other_topic = await bus.publish("other.c", "t", {})
        await wait_for(lambda: {same_topic, other_topic} <= set(fast.ids))
        assert fast.times[same_topic] - t0 < 0.1
        assert fast.times[other_topic] - t0 < 0.1
    finally:
        await bus.stop()


async def test_local_publish_wakes_dispatch_without_polling(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal(), poll_interval_s=60)
    rec = Recorder()
    bus.subscribe("ping.*", rec, "pong")
    await bus.start()
    try:
        latencies = []
        for _ in range(20):
            t0 = time.perf_counter()
            event_id = await bus.publish("ping.x", "t", {})
            await wait_for(lambda eid=event_id: eid in rec.times)  # type: ignore[misc]
            latencies.append(rec.times[event_id] - t0)
        # woken, not polled: every event long before the 60 s poll, most at once
        assert max(latencies) < 10 and sorted(latencies)[len(latencies) // 2] < 0.1, latencies
    finally:
        await bus.stop()


async def test_events_from_another_process_are_picked_up_by_polling(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal(), poll_interval_s=0.05)
    rec = Recorder()
    bus.subscribe("ext.*", rec, "listener")
    await bus.start()
    try:
        writer = EventBus(make_journal())  # a second bus on the same file, not started
        event_id = await writer.publish("ext.ping", "elsewhere", {"v": 1})
        await writer.stop()
        await wait_for(lambda: rec.ids == [event_id], what="foreign event")
    finally:
        await bus.stop()


async def test_subscriber_added_after_start(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal())
    await bus.start()
    try:
        before = await bus.publish("late.a", "t", {})
        rec = Recorder()
        bus.subscribe("late.*", rec, "late")
        after = await bus.publish("late.b", "t", {})
        await wait_for(lambda: rec.ids == [after])
        assert before not in rec.ids
        with pytest.raises(RuntimeError, match="already subscribed"):
            bus.subscribe("late.*", rec, "late")
    finally:
        await bus.stop()


async def test_a_deferred_delivery_is_handed_out_again_uncharged(
    make_journal: JournalFactory,
) -> None:
    """A handler that must not run an event yet gives it back (``DeliveryDeferred``,
    ADR 0039): no attempt is used, no retry backoff, it comes back at once."""
    bus = EventBus(make_journal(), retry_base_s=60, max_attempts=2)
    attempts: list[int] = []

    async def not_yet(event: Event) -> None:
        attempts.append(event.attempt)
        if len(attempts) < 4:
            raise DeliveryDeferred("an earlier event runs first")

    bus.subscribe("job.*", not_yet, "picky")
    await bus.start()
    try:
        event_id = await bus.publish("job.run", "t", {})
        await wait_for(lambda: len(attempts) == 4, what="given back three times, then run")

        async def done() -> bool:
            record = (await bus.journal.recent_events(limit=1))[0]
            return [(d.status, d.attempt) for d in record.deliveries] == [("done", 1)]

        await eventually(done)
    finally:
        await bus.stop()
    assert attempts == [1, 1, 1, 1] and event_id
