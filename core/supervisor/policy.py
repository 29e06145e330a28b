"""When to restart a crashed kernel, and when to give up.

Pure bookkeeping (no clocks, no processes) so the rules are easy to test:
exponential backoff per crash streak, a streak reset after a long healthy
run, and a limit on crashes inside a sliding window. Requested restarts are
counted too: a kernel that asks for a restart on every start (an extension
calling ``request_restart`` in ``start()``) gets the crash backoff once its
requests come faster than ``quick_restarts`` per ``restart_window_s``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from core.config import SupervisorSettings
from core.runtime.backoff import backoff_delay


@dataclass(frozen=True)
class CrashVerdict:
    """What to do after one crash."""

    give_up: bool
    delay_s: float
    crashes_in_window: int


class CrashPolicy:
    """Backoff ``initial * 2**(streak-1)`` capped at ``backoff_max_s``.

    The ``max_crashes``-th crash inside ``crash_window_s`` seconds means giving up.
    """

    def __init__(self, settings: SupervisorSettings) -> None:
        self._settings = settings
        self._crash_times: deque[float] = deque()
        self._streak = 0

    def record_crash(self, now: float, ran_for_s: float) -> CrashVerdict:
        """Count a crash at monotonic time ``now`` of a kernel that ran ``ran_for_s``."""
        s = self._settings
        if ran_for_s >= s.healthy_reset_s:
            self._streak = 0
        self._streak += 1
        self._crash_times.append(now)
        while self._crash_times and self._crash_times[0] <= now - s.crash_window_s:
            self._crash_times.popleft()
        count = len(self._crash_times)
        delay = backoff_delay(self._streak, s.backoff_initial_s, s.backoff_max_s)
        return CrashVerdict(give_up=count >= s.max_crashes, delay_s=delay, crashes_in_window=count)


class RestartRequestPolicy:
    """Delay before honouring a requested restart: none while requests are rare,
    then ``initial * 2**k`` (capped) for the k-th request over the allowance."""

    def __init__(self, settings: SupervisorSettings) -> None:
        self._settings = settings
        self._times: deque[float] = deque()

    def record_request(self, now: float) -> CrashVerdict:
        """Count a restart request at monotonic time ``now``; never gives up."""
        s = self._settings
        self._times.append(now)
        while self._times and self._times[0] <= now - s.restart_window_s:
            self._times.popleft()
        count = len(self._times)
        over = count - s.quick_restarts
        if over <= 0:
            return CrashVerdict(give_up=False, delay_s=0.0, crashes_in_window=count)
        delay = backoff_delay(over, s.backoff_initial_s, s.backoff_max_s)
        return CrashVerdict(give_up=False, delay_s=delay, crashes_in_window=count)
