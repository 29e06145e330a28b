"""Shared helpers for the event bus tests: waiting on conditions, recording handlers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from core.events import Event


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        await asyncio.sleep(0.005)


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
