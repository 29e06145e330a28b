"""What ``StateStore`` asks of the rows behind it, and the SQLite side of that.

``StateRows`` is the seam between the store (limits, logging, metrics) and
where rows live: ``ThreadedStateTable`` runs the SQLite ``StateTable`` in
one worker thread (in call order, on one connection), ``PostgresStateTable``
(``table_pg``) uses the process's PostgreSQL pool (ADR 0035).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from core.state.table import Limits, StateTable, Written

__all__ = ["StateRows", "ThreadedStateTable"]

T = TypeVar("T")


class StateRows(Protocol):
    """Rows keyed by (extension id, session id, key); see ``StateTable`` for each call."""

    async def prune(self, now: float) -> int: ...

    async def usage(self, ext_id: str, session_id: str | None = None) -> int: ...

    async def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> str | None: ...

    async def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> Written: ...

    async def delete(self, ext_id: str, session_id: str, key: str) -> bool: ...

    async def clear(self, ext_id: str, session_id: str) -> int: ...

    async def clear_session(self, session_id: str) -> dict[str, int]: ...

    async def reconcile_extensions(
        self, installed: Collection[str], now: float
    ) -> tuple[list[str], dict[str, int]]: ...

    async def close(self) -> None: ...


class ThreadedStateTable:
    """``StateTable`` (``state.db``) with every call in one worker thread, in order."""

    def __init__(self, db_path: Path, *, synchronous: str = "normal") -> None:
        self.table = StateTable(db_path, synchronous=synchronous)
        self._worker: ThreadPoolExecutor | None = None

    async def _thread(self, fn: Callable[..., T], *args: Any) -> T:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="hearth-state")
        call = functools.partial(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._worker, call)

    async def prune(self, now: float) -> int:
        return await self._thread(self.table.prune, now)

    async def usage(self, ext_id: str, session_id: str | None = None) -> int:
        return await self._thread(self.table.usage, ext_id, session_id)

    async def get(
        self, ext_id: str, session_id: str, key: str, now: float, ttl_s: float | None
    ) -> str | None:
        return await self._thread(self.table.get, ext_id, session_id, key, now, ttl_s)

    async def write(
        self, ext_id: str, session_id: str, key: str, value_json: str, now: float, limits: Limits
    ) -> Written:
        return await self._thread(
            self.table.write, ext_id, session_id, key, value_json, now, limits
        )

    async def delete(self, ext_id: str, session_id: str, key: str) -> bool:
        return await self._thread(self.table.delete, ext_id, session_id, key)

    async def clear(self, ext_id: str, session_id: str) -> int:
        return await self._thread(self.table.clear, ext_id, session_id)

    async def clear_session(self, session_id: str) -> dict[str, int]:
        return await self._thread(self.table.clear_session, session_id)

    async def reconcile_extensions(
        self, installed: Collection[str], now: float
    ) -> tuple[list[str], dict[str, int]]:
        return await self._thread(self.table.reconcile_extensions, installed, now)

    async def close(self) -> None:
        """Close the connection (checkpointing the WAL) and the worker thread."""
        if self._worker is not None:
            await self._thread(self.table.close)
            self._worker.shutdown()
            self._worker = None
