"""PostgreSQL connections: pools shared within a process, and single connections.

Every store of a process (journal, sessions, state, schedules, usage) asks
``pool_for`` for the pool of its DSN and gets the same one, so a process holds
``storage.pool_max_size`` connections at most rather than one pool per store;
the last ``release_pool`` closes it. An extension's stores live in a schema of
their own (ADR 0035): they share one pool per schema, whose connections have
it as their ``search_path`` (``pool_for(…, schema=…)``), so an extension
writes the same unqualified SQL as on SQLite. ``connect`` opens a dedicated
connection for what a pool cannot do (``LISTEN``).
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any

from core.runtime.errors import HearthError
from core.storage.dsn import hide_dsn_secrets, redact_dsn

__all__ = ["StorageError", "connect", "open_pool", "pool_for", "release_pool"]

CONNECT_TIMEOUT_S = 10.0


class StorageError(HearthError):
    """PostgreSQL is unreachable or its schema does not fit; the message names the DSN
    (password hidden) and what to do."""


def _unreachable(dsn: str, exc: BaseException) -> StorageError:
    reason = hide_dsn_secrets(str(exc), dsn)  # a driver's message may echo the DSN
    return StorageError(f"storage.postgres_dsn {redact_dsn(dsn)}: cannot connect: {reason}")


async def open_pool(
    dsn: str, *, min_size: int = 1, max_size: int = 10, schema: str | None = None
) -> Any:
    """An ``asyncpg.Pool`` for ``dsn`` (its connections' ``search_path`` is ``schema``
    when given); ``StorageError`` naming the DSN when the server cannot be reached or
    refuses the login."""
    import asyncpg  # here: a process that only opens SQLite files never loads it

    settings = None if schema is None else {"search_path": schema}
    try:
        return await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=CONNECT_TIMEOUT_S,
            server_settings=settings,
        )
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as exc:
        raise _unreachable(dsn, exc) from exc


async def connect(dsn: str) -> Any:
    """One dedicated ``asyncpg.Connection`` (e.g. for ``LISTEN``), same errors as ``open_pool``."""
    import asyncpg

    try:
        return await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S)
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as exc:
        raise _unreachable(dsn, exc) from exc


@dataclass
class _SharedPool:
    pool: Any
    users: int


@dataclass
class _LoopPools:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    by_dsn: dict[tuple[str, str | None], _SharedPool] = field(default_factory=dict)


_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPools] = (
    weakref.WeakKeyDictionary()
)


async def pool_for(
    dsn: str, *, min_size: int = 1, max_size: int = 10, schema: str | None = None
) -> Any:
    """The process's pool for ``dsn`` (and ``schema``, the ``search_path`` of an
    extension's stores) on the running event loop, opened on first use.

    Each call must be matched by one ``release_pool``; sizes are those of the first
    caller (every store reads them from the same ``storage`` settings).
    """
    pools = _loops.setdefault(asyncio.get_running_loop(), _LoopPools())
    key = (dsn, schema)
    async with pools.lock:
        shared = pools.by_dsn.get(key)
        if shared is None or shared.pool.is_closing():
            pool = await open_pool(dsn, min_size=min_size, max_size=max_size, schema=schema)
            shared = pools.by_dsn[key] = _SharedPool(pool, 0)
        shared.users += 1
        return shared.pool


async def release_pool(pool: Any) -> None:
    """Give back a pool from ``pool_for``; the last user closes it."""
    pools = _loops.get(asyncio.get_running_loop())
    for key, shared in list(pools.by_dsn.items()) if pools else ():
        if shared.pool is pool:
            shared.users -= 1
            if shared.users <= 0:
                del pools.by_dsn[key]  # type: ignore[union-attr]
                await pool.close()
            return
    await pool.close()  # not shared: opened with open_pool
