"""Publishing: durability, validation, idempotency, topics, publish before start."""

from __future__ import annotations

import asyncio
import copy
import math
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from core.events import Event, EventBus, SQLiteJournal, SystemTopics, topic_matches
from support.bus_helpers import (
    JournalFactory,
    Recorder,
    wait_for,
)


async def test_publish_is_committed_when_it_returns(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal())
    await bus.start()
    try:
        event_id = await bus.publish("note.saved", "test", {"text": "hi"}, correlation_id="c1")
        # Another connection (as another process would) sees the committed row at once.
        row = make_journal.stored_event(event_id)
        assert row == ("note.saved", "test", '{"text":"hi"}', "c1")
        if make_journal.backend == "sqlite":
            with sqlite3.connect(make_journal.location) as other:
                (mode,) = other.execute("PRAGMA journal_mode").fetchone()
            assert mode == "wal"
    finally:
        await bus.stop()


@pytest.mark.parametrize(
    "payload",
    [["not", "an", "object"], "text", None, {"when": object()}, {"x": math.nan}],
    ids=["list", "str", "none", "unserialisable", "nan"],
)
async def test_non_object_payload_raises_value_error_and_stores_nothing(
    make_journal: JournalFactory, payload: object
) -> None:
    bus = EventBus(make_journal())
    await bus.start()
    try:
        with pytest.raises(ValueError, match=r"note\.saved"):
            await bus.publish("note.saved", "test", payload)  # type: ignore[arg-type]
        assert (await bus.stats())["events"] == 0
    finally:
        await bus.stop()


@pytest.mark.parametrize("topic", ["", "has space", "tab\there", "wild.*"])
async def test_bad_topic_is_rejected(tmp_path: Path, topic: str) -> None:
    bus = EventBus(SQLiteJournal(tmp_path / "e.db"))
    with pytest.raises(ValueError):
        await bus.publish(topic, "test", {})
    with pytest.raises(ValueError):
        bus.subscribe(topic if topic != "wild.*" else "wild.*.x", Recorder(), "s")


def test_topic_patterns() -> None:
    assert topic_matches("reminder.*", "reminder.due")
    assert topic_matches("reminder.*", "reminder.x.y")
    assert not topic_matches("reminder.*", "reminder")
    assert not topic_matches("reminder.*", "reminders.due")
    assert topic_matches("*", "anything.at.all")
    assert topic_matches(SystemTopics.USER_MESSAGE, "user.message")
    assert not topic_matches("user.message", "user.message.extra")
    assert SystemTopics.USER_NOTIFY == "system.user.notify"
    assert SystemTopics.AGENT_TASK == "system.agent.task"
    assert SystemTopics.AGENT_BACKGROUND == "system.agent.background"


async def test_prefix_subscription_receives_matching_topics_only(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal())
    prefix, everything = Recorder(), Recorder()
    bus.subscribe("reminder.*", prefix, "prefix")
    bus.subscribe("*", everything, "all")
    await bus.start()
    try:
        for topic in ("reminder.due", "reminder", "reminder.x.y", "other.thing"):
            await bus.publish(topic, "test", {})
        await wait_for(lambda: len(everything.events) == 4)
        await wait_for(lambda: len(prefix.events) == 2)
        assert [e.topic for e in prefix.events] == ["reminder.due", "reminder.x.y"]
    finally:
        await bus.stop()


async def test_idempotent_publish_returns_first_id_across_restarts(
    make_journal: JournalFactory,
) -> None:
    rec = Recorder()
    bus = EventBus(make_journal())
    bus.subscribe("fire.*", rec, "fires")
    await bus.start()
    first = await bus.publish("fire.due", "sched", {"n": 1}, idempotency_key="sched:1")
    again = await bus.publish("fire.due", "sched", {"n": 2}, idempotency_key="sched:1")
    await wait_for(lambda: len(rec.events) == 1)
    await bus.stop()
    assert again == first

    bus2 = EventBus(make_journal())
    rec2 = Recorder()
    bus2.subscribe("fire.*", rec2, "fires")
    await bus2.start()
    try:
        third = await bus2.publish("fire.due", "sched", {"n": 3}, idempotency_key="sched:1")
        assert third == first
        assert (await bus2.stats())["events"] == 1
        other = await bus2.publish("fire.due", "sched", {"n": 4}, idempotency_key="sched:2")
        await wait_for(lambda: rec2.ids == [other])
    finally:
        await bus2.stop()
    assert [e.payload for e in rec.events] == [{"n": 1}]


async def test_one_group_commit_of_mixed_publishes_maps_each_to_its_own_event(
    make_journal: JournalFactory,
) -> None:
    """Keyless, keyed and duplicate-key publishes committed together each get the right id."""
    rec = Recorder()
    bus = EventBus(make_journal())
    bus.subscribe("mix.*", rec, "mix")
    await bus.start()
    try:
        earlier = await bus.publish("mix.a", "t", {"n": -1}, idempotency_key="k2")
        keys = [f"k{n % 3}" if n % 2 else None for n in range(30)]
        ids = await asyncio.gather(
            *(bus.publish("mix.a", "t", {"n": n}, idempotency_key=k) for n, k in enumerate(keys))
        )
        stored = {r.id: r for r in await bus.journal.recent_events(limit=100)}
        first_with_key: dict[str, int] = {"k2": earlier}
        for n, (key, event_id) in enumerate(zip(keys, ids, strict=True)):
            if key is None or key not in first_with_key:
                assert stored[event_id].payload == {"n": n}
                assert stored[event_id].idempotency_key == key
                if key is not None:
                    first_with_key[key] = event_id
            else:
                assert event_id == first_with_key[key]
        assert len(stored) == 1 + len(set(ids) - {earlier})
        await wait_for(lambda: len(rec.events) == len(stored), what="every stored event handled")
        assert {e.id: e.payload for e in rec.events} == {i: r.payload for i, r in stored.items()}
    finally:
        await bus.stop()


async def test_circular_payload_is_rejected(make_journal: JournalFactory) -> None:
    bus = EventBus(make_journal())
    payload: dict[str, object] = {}
    payload["self"] = payload
    with pytest.raises(ValueError, match=r"note\.saved.*circular"):
        await bus.publish("note.saved", "test", payload)
    assert (await bus.stats())["events"] == 0


async def test_publish_before_start_is_durable_and_delivered_after_start(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal())
    rec = Recorder()
    bus.subscribe("init.*", rec, "early")
    event_id = await bus.publish("init.done", "ext", {"ok": True})
    assert make_journal.stored_event(event_id) is not None
    assert rec.events == []
    await bus.start()
    try:
        await wait_for(lambda: rec.ids == [event_id])
        assert rec.events[0].payload == {"ok": True}
        assert rec.events[0].attempt == 1
    finally:
        await bus.stop()


async def test_publish_after_stop_is_stored_for_the_next_start(
    make_journal: JournalFactory,
) -> None:
    bus = EventBus(make_journal())
    bus.subscribe("late.*", Recorder(), "late")
    await bus.start()
    await bus.stop()
    event_id = await bus.publish("late.event", "ext", {})
    bus2 = EventBus(make_journal())
    rec = Recorder()
    bus2.subscribe("late.*", rec, "late")
    await bus2.start()
    try:
        await wait_for(lambda: rec.ids == [event_id])
    finally:
        await bus2.stop()


async def test_synchronous_full_is_applied(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "e.db", synchronous="full")
    bus = EventBus(journal)
    await bus.start()
    try:
        await bus.publish("a.b", "t", {})
        assert (await bus.stats())["events"] == 1
    finally:
        await bus.stop()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteJournal(tmp_path / "x.db", synchronous="off")  # type: ignore[arg-type]


async def test_each_subscriber_gets_its_own_copy_of_the_journaled_payload(
    make_journal: JournalFactory,
) -> None:
    """A handler that mutates its payload changes nobody else's: not another
    subscriber's copy, not the publisher's dict, not a redelivery. Each copy is
    what the journal holds (a tuple arrives as a list), as after a restart."""
    seen: dict[str, list[dict[str, object]]] = {"first": [], "second": []}

    def handler(name: str) -> Callable[[Event], Awaitable[None]]:
        async def handle(event: Event) -> None:
            seen[name].append(copy.deepcopy(event.payload))
            event.payload["items"].append("mutated by " + name)  # type: ignore[attr-defined]
            event.payload["text"] = name

        return handle

    bus = EventBus(make_journal())
    bus.subscribe("note.*", handler("first"), "first")
    bus.subscribe("note.*", handler("second"), "second")
    await bus.start()
    try:
        payload = {"text": "hi", "items": ("a", "b")}
        for _ in range(3):
            await bus.publish("note.saved", "test", payload)
        payload["text"] = "changed after publish"
        await wait_for(lambda: len(seen["first"]) == len(seen["second"]) == 3, what="deliveries")
    finally:
        await bus.stop()
    expected = {"text": "hi", "items": ["a", "b"]}
    assert seen == {"first": [expected] * 3, "second": [expected] * 3}
    assert payload == {"text": "changed after publish", "items": ("a", "b")}
