"""Clock readings and random bytes a granted guest draws, kept for replay.

A wasm extension is deterministic by default: without ``wasm.clock`` or
``wasm.random`` it has no import that could tell two runs apart. When it is
granted one, every value it draws goes through a ``DrawLog``: live, each is
recorded (the extension publishes the call's draws on ``<id>.wasm.draws``,
so they are in the event journal); replaying, the recorded values are given
back in order, so the guest computes what it computed then.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from core.runtime.errors import HearthError

__all__ = ["DrawLog", "ReplayExhaustedError"]


class ReplayExhaustedError(HearthError):
    """A replayed guest drew a value the recording does not hold."""


class DrawLog:
    """Live or replaying source of the guest's clock and randomness."""

    def __init__(self, recorded: Iterable[dict[str, Any]] | None = None) -> None:
        self._replay = None if recorded is None else list(recorded)
        self._drawn: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    @property
    def replaying(self) -> bool:
        return self._replay is not None

    def clock_ms(self) -> int:
        """Milliseconds since the epoch (UTC)."""
        return int(self._draw("clock", lambda: int(time.time() * 1000)))

    def random_bytes(self, length: int) -> bytes:
        return bytes.fromhex(str(self._draw("random", lambda: os.urandom(length).hex())))

    def take(self) -> list[dict[str, Any]]:
        """The draws since the last ``take`` (one call's), oldest first."""
        with self._lock:
            drawn, self._drawn = self._drawn, []
        return drawn

    def _draw(self, kind: str, live: Any) -> Any:
        with self._lock:
            if self._replay is None:
                value = live()
            else:
                if not self._replay or self._replay[0].get("kind") != kind:
                    got = self._replay[0].get("kind") if self._replay else "nothing"
                    raise ReplayExhaustedError(f"replay: the guest drew {kind}, recorded: {got}")
                value = self._replay.pop(0)["value"]
            self._drawn.append({"kind": kind, "value": value})
            return value
