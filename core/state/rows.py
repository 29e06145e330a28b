"""What ``StateStore`` asks of the rows behind it, and the SQLite side of that.

``StateRows`` is the seam between the store (limits, logging, metrics) and
where rows live: ``ThreadedStateTable`` runs the SQLite ``StateTable`` in
one worker thread (in call order, on one connection), ``PostgresStateTable``
(``table_pg``) uses the process's PostgreSQL pool (ADR 0035).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from core.state.table import Limits, NodeRoster, StateTable, Written

__all__ = ["StateRows", "ThreadedStateTable"]

T = TypeVar("T")


class StateRows(Protocol):
    """Rows keyed by (extension id, session id, key); see ``StateTable`` for each call."""

    def prune(self, now: float) -> Awaitable[int]: ...

    def usage(self, ext_id: str, session_id: str | None = None) -> Awaitable[int]: ...

    def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> Awaitable[str | None]: ...

    def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> Awaitable[Written]: ...

    def delete(self, ext_id: str, session_id: str, key: str) -> Awaitable[bool]: ...

    def clear(self, ext_id: str, session_id: str) -> Awaitable[int]: ...

    def clear_session(self, session_id: str) -> Awaitable[dict[str, int]]: ...

    def reconcile_extensions(
        self, installed: Collection[str], now: float, roster: NodeRoster | None = None
    ) -> Awaitable[tuple[list[str], dict[str, int], list[str]]]: ...

    def close(self) -> Awaitable[None]: ...


class ThreadedStateTable:
    """``StateTable`` (``state.db``) with every call in one worker thread, in order."""

    def __init__(self, db_path: Path, *, synchronous: str = "normal") -> None:
        self.table = StateTable(db_path, synchronous=synchronous)
        self._worker: ThreadPoolExecutor | None = None

    def _thread(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` in the worker thread, after the calls made before it: the
        executor's future itself (no task around it, as before the seam)."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="hearth-state")
        call = functools.partial(fn, *args)
        return asyncio.get_running_loop().run_in_executor(self._worker, call)

    def prune(self, now: float) -> asyncio.Future[int]:
        return self._thread(self.table.prune, now)

    def usage(self, ext_id: str, session_id: str | None = None) -> asyncio.Future[int]:
        return self._thread(self.table.usage, ext_id, session_id)

    def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> asyncio.Future[str | None]:
        return self._thread(self.table.get, ext_id, session_id, key, now, ttl_s)

    def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> asyncio.Future[Written]:
        return self._thread(self.table.write, ext_id, session_id, key, value_json, now, limits)

    def delete(self, ext_id: str, session_id: str, key: str) -> asyncio.Future[bool]:
        return self._thread(self.table.delete, ext_id, session_id, key)

    def clear(self, ext_id: str, session_id: str) -> asyncio.Future[int]:
        return self._thread(self.table.clear, ext_id, session_id)

    def clear_session(self, session_id: str) -> asyncio.Future[dict[str, int]]:
        return self._thread(self.table.clear_session, session_id)

    def reconcile_extensions(
        self, installed: Collection[str], now: float, roster: NodeRoster | None = None
    ) -> asyncio.Future[tuple[list[str], dict[str, int], list[str]]]:
        return self._thread(self.table.reconcile_extensions, installed, now, roster)

    async def close(self) -> None:
        """Close the connection (checkpointing the WAL) and the worker thread."""
        if self._worker is not None:
            await self._thread(self.table.close)
            self._worker.shutdown()
            self._worker = None
