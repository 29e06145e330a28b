"""The fire loop of a timer: fire what is due, sleep until the next due time.

No fixed tick: the loop sleeps until the earliest due instant, bounded by
``max_sleep_s`` so a wall-clock jump or a suspended host is noticed, and
``wake()`` makes it look again at once (a schedule was added or changed).
A failing pass is logged and retried with exponential backoff (2, 4, 8 s …
up to ``max_sleep_s``), so a locked database never spins the CPU. The
kernel's manifest schedules and the scheduler extension both run on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from core.extensions.sdk.timemath import utc_now
from core.runtime.backoff import backoff_delay

__all__ = ["Clock", "DueLoop"]

Clock = Callable[[], datetime]


class DueLoop:
    """Runs ``fire_due`` whenever something may be due, until cancelled.

    ``fire_due`` publishes every fire due by now; ``next_due`` returns the
    earliest due instant left (``None``: nothing planned). Both are the
    caller's; the loop owns only the waiting.
    """

    def __init__(
        self,
        fire_due: Callable[[], Awaitable[object]],
        next_due: Callable[[], Awaitable[datetime | None]],
        clock: Clock = utc_now,
        *,
        max_sleep_s: float = 300.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self.fire_due = fire_due
        self.next_due = next_due
        self.clock = clock
        self.max_sleep_s = max_sleep_s
        self.log = logger or logging.getLogger(__name__)
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look at the due times again now (they changed)."""
        self._wake.set()

    async def run(self) -> None:
        """Until cancelled; never returns otherwise, never raises a pass's error."""
        failures = 0
        while True:
            self._wake.clear()
            try:
                await self.fire_due()
                failures = 0
                timeout = await self.sleep_s()
            except Exception:
                failures += 1
                self.log.exception("firing schedules failed (attempt %d)", failures)
                timeout = backoff_delay(failures, 2.0, self.max_sleep_s)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def sleep_s(self) -> float:
        """Seconds until the next due time, between 0 and ``max_sleep_s``."""
        due = await self.next_due()
        if due is None:
            return self.max_sleep_s
        return min(max((due - self.clock()).total_seconds(), 0.0), self.max_sleep_s)
