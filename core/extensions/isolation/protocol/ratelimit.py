"""The one rate limiter on every path from a plugin host to the kernel's log.

A host controls how much it prints, logs, sends as unknown notifications and
subscribes; each of those paths goes through a ``LogLimiter`` so a flood
costs a bounded number of log lines, and what was dropped is summarised
(``… 99,000 lines of plugin host output suppressed``) instead of lost
silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["LOG_BURST", "LOG_RATE_PER_S", "SUMMARY_INTERVAL_S", "LogLimiter"]

LOG_RATE_PER_S = 50.0
LOG_BURST = 200.0
SUMMARY_INTERVAL_S = 5.0


class LogLimiter:
    """A token bucket in front of ``logger``: ``burst`` lines at once, then
    ``rate_per_s``; at most one summary of dropped lines per ``SUMMARY_INTERVAL_S``
    (and one more at ``flush()``)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        rate_per_s: float = LOG_RATE_PER_S,
        burst: float = LOG_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._what = what
        self._rate = rate_per_s
        self._burst = burst
        self._clock = clock
        self._tokens = burst
        self._refilled = clock()
        self._summarised = self._refilled
        self.dropped = 0  # since the last summary
        self.total_dropped = 0

    def allow(self) -> bool:
        """Take a token; ``False`` (and counted as dropped) when there is none."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        if self._tokens < 1:
            self.dropped += 1
            self.total_dropped += 1
            return False
        self._tokens -= 1
        if self.dropped and now - self._summarised >= SUMMARY_INTERVAL_S:
            self.flush()
        return True

    def log(self, level: int, msg: str, *args: object) -> None:
        """``logger.log(level, msg, *args)`` unless the bucket is empty."""
        if self.allow():
            self._logger.log(level, msg, *args)

    def flush(self) -> None:
        """Log the summary of what was dropped since the last one (if anything)."""
        self._summarised = self._clock()
        if self.dropped:
            dropped, self.dropped = self.dropped, 0
            self._logger.warning("… %s %s suppressed (rate limit)", f"{dropped:,}", self._what)
