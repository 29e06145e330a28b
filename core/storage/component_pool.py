"""One store's hold on the process's shared pool (ADR 0034, 0035).

Every PostgreSQL store of the kernel — sessions, approvals, post-processing,
state, fire state — does the same three things with the pool: take it at
open, migrating its schema components first; refuse to be used before that;
give it back at close. ``ComponentPool`` is that, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.storage.migrations import migrated_pool
from core.storage.postgres import release_pool

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["ComponentPool"]


class ComponentPool:
    """The shared pool for ``components``, held by the store called ``what``
    (named in the error when it is used before ``open``)."""

    def __init__(self, storage: StorageSettings, components: Sequence[str], what: str) -> None:
        self.storage = storage
        self.components = list(components)
        self.what = what
        self._pool: Any = None
        self._opening = asyncio.Lock()

    @property
    def is_open(self) -> bool:
        return self._pool is not None

    @property
    def pool(self) -> Any:
        """The open ``asyncpg.Pool``; ``RuntimeError`` before ``open()``."""
        if self._pool is None:
            raise RuntimeError(f"{self.what} not open (open() at start)")
        return self._pool

    async def open(self) -> Any:
        """Take the pool, migrating the components first (once; concurrent callers
        wait). Cheap once open: stores may call it before every use."""
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                self._pool = await migrated_pool(self.storage, self.components)
        return self._pool

    async def close(self) -> None:
        """Give the pool back (the last holder in the process closes it)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await release_pool(pool)
