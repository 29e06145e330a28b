"""A token bucket per extension, with one summarised log line per window.

Notifications and agent requests reach the user or spend model tokens, so an
extension (bugged or hostile) must not send thousands a second. Each context
owns one ``RateLimit`` per guarded action; a refusal raises
``RateLimitedError`` and the log records how many were refused once per
window instead of once per call (a flood must not become a log flood).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from core.extensions.errors import RateLimitedError


class RateLimit:
    """``per_minute`` calls a minute on average, up to ``burst`` at once."""

    def __init__(
        self,
        extension_id: str,
        action: str,
        per_minute: float,
        burst: int,
        logger: logging.Logger,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.extension_id = extension_id
        self.action = action
        self.per_minute = per_minute
        self.burst = max(1, burst)
        self._logger = logger
        self._clock = clock
        self._tokens = float(self.burst)
        self._refilled = clock()
        self._refused = 0
        self._window_start: float | None = None

    def take(self) -> None:
        """Spend one token or raise ``RateLimitedError`` (logging a summary per window)."""
        now = self._clock()
        rate_per_s = self.per_minute / 60.0
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * rate_per_s)
        self._refilled = now
        self._flush(now)
        if self._tokens >= 1:
            self._tokens -= 1
            return
        if self._window_start is None:
            self._window_start = now
            self._logger.warning(
                "extension %r exceeds its rate limit for %s (%g a minute, burst %d); "
                "refusing until it slows down",
                self.extension_id,
                self.action,
                self.per_minute,
                self.burst,
            )
        self._refused += 1
        raise RateLimitedError(self.extension_id, self.action, self.per_minute)

    def _flush(self, now: float) -> None:
        """Log the refusals of a finished window as one line."""
        if self._window_start is None or now - self._window_start < 60.0:
            return
        self._logger.warning(
            "extension %r: %d %s calls refused by the rate limit in the last %.0f s",
            self.extension_id,
            self._refused,
            self.action,
            now - self._window_start,
        )
        self._refused = 0
        self._window_start = None
