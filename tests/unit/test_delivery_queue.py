"""A subscriber's delivery queue, now waking one idle worker per delivery instead
of all ``turns.concurrency`` of them (issue 29; the saving shows in
``bench/floor.py --profile``): each delivery still reaches exactly one worker,
in order, and a worker cancelled just after being woken loses nothing."""

from __future__ import annotations

import asyncio

from core.events.models import Event
from core.events.subscriptions import DeliveryQueue


def event(n: int) -> Event:
    return Event(id=n, topic="user.message", payload={"n": n}, source="test", created_at=0.0)


async def idle_workers(
    queue: DeliveryQueue, count: int
) -> tuple[list[asyncio.Task[None]], list[tuple[int, Event | None]]]:
    """``count`` workers waiting on ``queue``; (worker, item) for each item taken."""
    taken: list[tuple[int, Event | None]] = []

    async def worker(index: int) -> None:
        while True:
            item = await queue.get()
            taken.append((index, item))
            if item is None:
                return

    tasks = [asyncio.create_task(worker(index)) for index in range(count)]
    for _ in range(3):
        await asyncio.sleep(0)  # every worker is now waiting
    return tasks, taken


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_one_delivery_reaches_exactly_one_of_many_idle_workers() -> None:
    queue = DeliveryQueue()
    tasks, taken = await idle_workers(queue, 32)
    queue.put(event(1))
    await settle()
    assert [item.id for _, item in taken if item is not None] == [1]
    for _ in range(32):
        queue.put(None)
    await settle()
    assert sorted(worker for worker, item in taken if item is None) == list(range(32))
    assert all(task.done() for task in tasks)  # each stop sentinel stopped one worker


async def test_a_burst_reaches_the_workers_once_each_in_order() -> None:
    queue = DeliveryQueue()
    tasks, taken = await idle_workers(queue, 4)
    for n in range(1, 11):
        queue.put(event(n))
    await settle()
    assert [item.id for _, item in taken if item is not None] == list(range(1, 11))
    assert len(queue) == 0
    for task in tasks:
        task.cancel()


async def test_a_worker_cancelled_after_its_wake_up_passes_the_delivery_on() -> None:
    queue = DeliveryQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put(event(7))  # wakes ``first`` ...
    first.cancel()  # ... which is cancelled before it runs
    got = await asyncio.wait_for(second, 5)
    assert got is not None and got.id == 7
    assert first.cancelled()
    assert len(queue) == 0
