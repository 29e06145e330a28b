"""Shared helpers for the event bus tests: waiting on conditions, recording handlers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.events import Event

T = TypeVar("T")


async def wait_for(condition: Callable[[], bool], within: float = 5.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or condition}")
        await asyncio.sleep(0.005)


async def eventually(fetch: Callable[[], Awaitable[T]], within: float = 5.0) -> T:
    """Await ``fetch()`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = await fetch()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {fetch}")
        await asyncio.sleep(0.01)


class Recorder:
    """A handler that records every event it is given (and when)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.times: dict[int, float] = {}

    async def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.times.setdefault(event.id, time.perf_counter())

    @property
    def ids(self) -> list[int]:
        return [e.id for e in self.events]
