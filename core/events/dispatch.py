"""Running handlers: one worker loop per unit of a subscriber's concurrency.

A handler's result becomes an ``Outcome`` (done, retry with exponential
backoff, dead with the error text, or released when the handler deferred it
with ``DeliveryDeferred``); the worker hands it to the writer and
moves on. Exceptions from handlers never escape a worker; cancellation does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.events.errors import DeliveryDeferred
from core.events.journal import Outcome
from core.events.models import Event
from core.events.stats import BusStats
from core.events.subscriptions import Subscription
from core.runtime.backoff import backoff_delay

__all__ = ["RetryPolicy", "run_handler", "worker_loop"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int
    base_s: float
    max_s: float

    def delay(self, attempt: int) -> float:
        """Wait before the attempt after ``attempt`` (1-based): base * 2**(attempt-1), capped."""
        return backoff_delay(attempt, self.base_s, self.max_s)


async def run_handler(sub: Subscription, event: Event, policy: RetryPolicy) -> Outcome:
    """Call the handler once; cancellation of the caller propagates untouched."""
    deadline = None if sub.timeout is None else asyncio.timeout(sub.timeout)
    try:
        if deadline is None:
            await sub.handler(event)
        else:
            async with deadline:
                await sub.handler(event)
    except TimeoutError as exc:
        if deadline is not None and deadline.expired():
            error = f"handler {sub.id!r} timed out after {sub.timeout}s"
        else:
            error = f"TimeoutError: {exc}"
    except DeliveryDeferred as deferred:
        log.info("event %d deferred by subscriber %r: %s", event.id, sub.id, deferred)
        return Outcome(event.id, sub.id, "released")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        error = "handler raised CancelledError"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.warning(
            "event %d (%s) failed in subscriber %r, attempt %d/%d: %s",
            event.id,
            event.topic,
            sub.id,
            event.attempt,
            policy.max_attempts,
            error,
            exc_info=exc,
        )
    else:
        return Outcome(event.id, sub.id, "done")
    if event.attempt >= policy.max_attempts:
        log.error("event %d dead-lettered for subscriber %r: %s", event.id, sub.id, error)
        return Outcome(event.id, sub.id, "dead", error=error)
    next_at = time.time() + policy.delay(event.attempt)
    return Outcome(event.id, sub.id, "retry", error=error, next_at=next_at)


async def worker_loop(
    sub: Subscription,
    policy: RetryPolicy,
    report: Callable[[Subscription, Outcome], None],
    stats: BusStats | None = None,
) -> None:
    """Take deliveries from the subscriber's queue in order until a ``None`` sentinel.

    A delivery interrupted by cancellation stays in ``sub.running`` so the bus
    can release it (it is redelivered later, not counted as a failure). The
    first attempt of each delivery adds its publish -> handler latency to ``stats``.
    """
    while True:
        event = await sub.queue.get()
        if event is None:
            return
        if stats is not None and event.attempt == 1:
            stats.observe_latency(time.time() - event.created_at)
        sub.running[event.id] = event
        try:
            outcome = await run_handler(sub, event, policy)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the bus itself; keep the worker alive
            log.exception("subscriber %r: internal error handling event %d", sub.id, event.id)
            outcome = Outcome(event.id, sub.id, "retry", error=repr(exc), next_at=time.time() + 1)
        del sub.running[event.id]
        report(sub, outcome)
