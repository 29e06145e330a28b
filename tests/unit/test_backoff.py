"""Every retry loop waits by one rule (core/runtime/backoff.py): a failure streak
doubles the wait up to its cap, and a success starts the streak again."""

from __future__ import annotations

from core.config import SupervisorSettings
from core.events.dispatch import RetryPolicy
from core.extensions.sdk import Backoff
from core.runtime.backoff import backoff_delay
from core.supervisor.policy import CrashPolicy


def test_waits_double_up_to_the_cap_and_stay_finite_on_endless_streaks() -> None:
    assert [backoff_delay(n, 0.5, 4.0) for n in range(0, 7)] == [0.0, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert backoff_delay(10_000, 1.0, 300.0) == 300.0


def test_a_streak_is_its_own_and_a_fresh_one_starts_from_the_first_wait() -> None:
    policy = Backoff(1.0, 8.0)
    streak = policy.delays()
    assert [streak.next() for _ in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert policy.delays().next() == 1.0


def test_the_bus_and_the_supervisor_wait_by_the_same_rule() -> None:
    bus = RetryPolicy(max_attempts=5, base_s=0.25, max_s=2.0)
    assert [bus.delay(n) for n in range(1, 6)] == [backoff_delay(n, 0.25, 2.0) for n in range(1, 6)]
    settings = SupervisorSettings(backoff_initial_s=1.0, backoff_max_s=8.0, max_crashes=100)
    crashes = CrashPolicy(settings)
    waits = [crashes.record_crash(now=float(n), ran_for_s=0.1).delay_s for n in range(5)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]
