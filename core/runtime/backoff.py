"""One rule for waiting after failures: exponential backoff, doubled per attempt
and capped.

Every retry loop of Hearth — the bus's handler retries, extension restarts,
the supervisor's crash and restart-request delays, MCP reconnects, a failing
due-loop pass, the Telegram channel's polling and sending — waits by this
rule, so "how long until it tries again" means the same everywhere and a
change to it (a jitter, a cap) is made once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Backoff", "Delays", "backoff_delay"]

# 2**62 keeps the product a finite float however long a failure streak gets
_MAX_DOUBLINGS = 62


def backoff_delay(attempt: int, initial_s: float, max_s: float) -> float:
    """The wait after the ``attempt``-th failure in a row (1-based):
    ``initial_s * 2**(attempt-1)``, capped at ``max_s``; none before the first."""
    if attempt < 1:
        return 0.0
    return float(min(max_s, initial_s * 2 ** min(attempt - 1, _MAX_DOUBLINGS)))


@dataclass
class Backoff:
    """A backoff policy: ``initial_s`` after the first failure, doubling up to ``max_s``."""

    initial_s: float
    max_s: float

    def delay(self, attempt: int) -> float:
        """The wait after the ``attempt``-th failure in a row (see ``backoff_delay``)."""
        return backoff_delay(attempt, self.initial_s, self.max_s)

    def delays(self) -> Delays:
        """A fresh streak: each ``next()`` is the wait after one more failure."""
        return Delays(self)


class Delays:
    """The waits of one failure streak under a ``Backoff`` (read when it is used,
    so a policy changed mid-streak applies from the next wait)."""

    def __init__(self, policy: Backoff) -> None:
        self._policy = policy
        self._attempt = 0

    def next(self) -> float:
        self._attempt += 1
        return self._policy.delay(self._attempt)
