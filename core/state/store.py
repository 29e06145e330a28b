"""``StateStore``: extension state in one kernel database (SPEC §9, ADR 0022).

The async front of the state rows (``StateTable``, on ``state.db`` — one
connection on a thread of its own, in call order, closed by ``aclose`` — or
on PostgreSQL with ``storage.backend: postgres``, ADR 0035, 0051); a caller
cancelled mid-call still
waits for the started call to finish before the cancellation goes on. It
logs what a user or an extension author needs to see — each eviction
(extension id and key), the 80 % warnings (once per upward crossing),
clears — and counts operations per
(operation, extension id) and evictions per extension, for metrics; after
each write it tells ``size_observer`` the extension's size.

``session_id=None`` addresses an extension's extension-wide state.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from core.config import StateSettings, StorageSettings
from core.extensions.access.state_scope import check_key, encode_value
from core.state.table import (
    EXTENSION_SCOPE,
    PER_EXTENSION,
    PER_SESSION,
    Limits,
    NodeRoster,
    StateTable,
    Written,
)

if TYPE_CHECKING:
    from core.config import Settings

__all__ = ["WARN_FRACTION", "Reconciled", "StateStore"]

log = logging.getLogger("core.state")

WARN_FRACTION = 0.8  # of a limit: crossing it upwards logs a warning
PRUNE_INTERVAL_S = 600.0  # expired rows of every extension are deleted this often (on a write)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reconciled:
    """Extensions installed since the last start, and those gone (with the
    number of state keys forgotten for each)."""

    registered: tuple[str, ...]
    unregistered: dict[str, int]
    elsewhere: tuple[str, ...] = ()  # missing here, installed on another node: kept


class StateStore:
    """Every extension's state, in ``<data>/state.db`` (table ``hearth_extension_state``)."""

    def __init__(
        self,
        db_path: Path,
        settings: StateSettings,
        *,
        synchronous: str = "normal",
        clock: Callable[[], float] = time.time,
        storage: StorageSettings | None = None,
        size_observer: Callable[[str, int], None] | None = None,
    ) -> None:
        self.db_path = db_path
        self.limits = Limits(
            settings.ttl_s, settings.max_bytes_per_extension, settings.max_bytes_per_session
        )
        self.operations: Counter[tuple[str, str]] = Counter()  # (operation, ext id) -> calls
        self.evictions: Counter[str] = Counter()  # ext id -> keys evicted
        # told (ext id, its state's bytes) after each write (the size metric)
        self.size_observer = size_observer
        self._rows = StateTable.at(db_path, storage, synchronous=synchronous)
        self._clock = clock
        self._pruned_at = -math.inf

    @classmethod
    def of(
        cls,
        settings: Settings,
        db_path: Path,
        size_observer: Callable[[str, int], None] | None = None,
    ) -> StateStore:
        """The kernel's: ``state.*`` limits, on ``db_path`` or PostgreSQL
        (``storage.backend``), with the journal's durability (``events.synchronous``);
        ``size_observer`` is told each extension's size after a write (metrics)."""
        return cls(
            db_path,
            settings.state,
            synchronous=settings.events.synchronous,
            storage=settings.storage,
            size_observer=size_observer,
        )

    async def open(self) -> None:
        """Create the table and prune what expired while the kernel was down."""
        now = self._clock()
        pruned = await _finish(self._rows.prune(now))
        self._pruned_at = now
        if pruned:
            log.info("extension state: pruned %d expired keys", pruned)

    async def aclose(self) -> None:
        """Close the connection (kernel stop); a later call opens it again."""
        await _finish(self._rows.close())

    # ------------------------------------------------------------ extension calls

    async def get(self, ext_id: str, session_id: str | None, key: str, default: Any = None) -> Any:
        """What an extension reads: the value, or ``default``; renews the key's expiry
        and its place in the LRU order."""
        check_key(key)
        self.operations["get", ext_id] += 1
        raw = await _finish(
            self._rows.get(ext_id, _scope(session_id), key, self._clock(), self.limits.ttl_s)
        )
        return default if raw is None else json.loads(raw)

    async def set(self, ext_id: str, session_id: str | None, key: str, value: Any) -> None:
        """Store a JSON value; ``StateLimitError`` over a limit; evicts beyond the cap."""
        check_key(key)
        encoded = encode_value(key, value)
        session = _scope(session_id)
        self.operations["set", ext_id] += 1
        now = self._clock()
        written = await _finish(self._rows.write(ext_id, session, key, encoded, now, self.limits))
        self._report(ext_id, session, written)
        if now - self._pruned_at > PRUNE_INTERVAL_S:
            self._pruned_at = now
            await _finish(self._rows.prune(now))

    async def delete(self, ext_id: str, session_id: str | None, key: str) -> bool:
        """Forget one key; whether it was there."""
        check_key(key)
        self.operations["delete", ext_id] += 1
        return await _finish(self._rows.delete(ext_id, _scope(session_id), key))

    async def clear(self, ext_id: str, session_id: str | None) -> int:
        """Forget the extension's keys of one scope (logged); how many there were."""
        session = _scope(session_id)
        self.operations["clear", ext_id] += 1
        count = await _finish(self._rows.clear(ext_id, session))
        log.info("extension %s cleared its state (%s): %d keys", ext_id, _where(session), count)
        return count

    # ------------------------------------------------------------ kernel calls

    async def read(self, ext_id: str, session_id: str | None, key: str, default: Any = None) -> Any:
        """What the kernel reads (e.g. a prompt addition's ``state_value`` condition):
        the value, or ``default``; unlike ``get`` it renews nothing."""
        raw = await _finish(self._rows.get(ext_id, _scope(session_id), key, self._clock(), None))
        return default if raw is None else json.loads(raw)

    async def clear_session(self, session_id: str) -> int:
        """Forget every extension's state of a session that ended (``/new``)."""
        counts = await _finish(self._rows.clear_session(session_id))
        if counts:
            described = ", ".join(f"{ext} ({n} keys)" for ext, n in sorted(counts.items()))
            log.info("session %s ended: forgot the state of %s", session_id, described)
        return sum(counts.values())

    async def reconcile_extensions(
        self, installed: Collection[str], roster: NodeRoster | None = None
    ) -> Reconciled:
        """Kernel start: record which extensions are installed; an extension gone
        since (its directory removed) is unregistered and its state forgotten. With a
        ``roster`` (several nodes on PostgreSQL) only when no node that stamped its
        list within ``roster.grace_s`` has it installed (ADR 0039)."""
        new, gone, elsewhere = await _finish(
            self._rows.reconcile_extensions(frozenset(installed), self._clock(), roster)
        )
        return Reconciled(tuple(new), gone, tuple(elsewhere))

    async def size_bytes(self, ext_id: str, session_id: str | None = None) -> int:
        """Bytes the extension's state holds (in one session's scope, when given)."""
        scope = None if session_id is None else _scope(session_id)
        return await _finish(self._rows.usage(ext_id, scope))

    # ------------------------------------------------------------ helpers

    def _report(self, ext_id: str, session_id: str, written: Written) -> None:
        limits = self.limits
        if self.size_observer is not None:
            self.size_observer(ext_id, written.extension_after)
        for gone in written.evicted:
            log.warning(
                "extension %s: evicted state key %r (%s, %d bytes, least recently used) to stay "
                "within %s (%d bytes)",
                ext_id,
                gone.key,
                _where(gone.session_id),
                gone.size,
                PER_EXTENSION,
                limits.max_bytes_per_extension,
            )
        self.evictions[ext_id] += len(written.evicted)
        if _crossed(
            written.extension_before, written.extension_after, limits.max_bytes_per_extension
        ):
            log.warning(
                "extension %s: its state holds %d bytes, over 80%% of %s (%d); the least "
                "recently used keys are evicted beyond it",
                ext_id,
                written.extension_after,
                PER_EXTENSION,
                limits.max_bytes_per_extension,
            )
        if session_id != EXTENSION_SCOPE and _crossed(
            written.session_before, written.session_after, limits.max_bytes_per_session
        ):
            log.warning(
                "extension %s: its state of session %s holds %d bytes, over 80%% of %s (%d); "
                "writes beyond it are refused",
                ext_id,
                session_id,
                written.session_after,
                PER_SESSION,
                limits.max_bytes_per_session,
            )


def _scope(session_id: str | None) -> str:
    if session_id is None:
        return EXTENSION_SCOPE
    if not session_id:
        raise ValueError("a session id must not be empty (None addresses extension scope)")
    return session_id


def _where(session_id: str) -> str:
    return "extension scope" if session_id == EXTENSION_SCOPE else f"session {session_id}"


def _crossed(before: int, after: int, limit: int) -> bool:
    threshold = WARN_FRACTION * limit
    return before < threshold <= after


async def _finish(call: Awaitable[T]) -> T:
    """Await a worker-thread call; when the caller is cancelled, let the started
    call finish first (its write lands or not, never half), then re-raise."""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise
