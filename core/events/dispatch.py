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
    except BaseException as exc:
        outcome = _failed(sub, event, policy, exc, deadline)
        if outcome is None:
            raise
        return outcome
    return Outcome(event.id, sub.id, "done")


def _failed(
    sub: Subscription,
    event: Event,
    policy: RetryPolicy,
    exc: BaseException,
    deadline: asyncio.Timeout | None,
) -> Outcome | None:
    """The outcome of a handler call that raised ``exc``; None: let it propagate
    (the worker itself is cancelled, or a ``BaseException`` that is no handler error)."""
    if isinstance(exc, TimeoutError):
        if deadline is not None and deadline.expired():
            error = f"handler {sub.id!r} timed out after {sub.timeout}s"
        else:
            error = f"TimeoutError: {exc}"
    elif isinstance(exc, DeliveryDeferred):
        log.info("event %d deferred by subscriber %r: %s", event.id, sub.id, exc)
        return Outcome(event.id, sub.id, "released")
    elif isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            return None
        error = "handler raised CancelledError"
    elif isinstance(exc, Exception):
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
        return None
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
    queue, running, handler = sub.queue, sub.running, sub.handler
    while True:
        # what is queued already is taken without a coroutine of the queue's
        event = queue.get_nowait() if queue else await queue.get()
        if event is None:
            return
        if stats is not None and event.attempt == 1:
            stats.observe_latency(time.time() - event.created_at)
        running[event.id] = event
        try:
            if sub.timeout is None:  # the common case, called here: no coroutine around it
                try:
                    await handler(event)
                except BaseException as exc:
                    failed = _failed(sub, event, policy, exc, None)
                    if failed is None:
                        raise
                    outcome = failed
                else:
                    outcome = Outcome(event.id, sub.id, "done")
            else:
                outcome = await run_handler(sub, event, policy)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the bus itself; keep the worker alive
            log.exception("subscriber %r: internal error handling event %d", sub.id, event.id)
            outcome = Outcome(event.id, sub.id, "retry", error=repr(exc), next_at=time.time() + 1)
        del running[event.id]
        report(sub, outcome)
