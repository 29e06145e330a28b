"""Activations in PostgreSQL (``storage.backend: postgres``, ADR 0035).

The same rows as in ``sessions.db``, in the ``sessions`` component. Seeding
the built-ins is one transaction that inserts with ``ON CONFLICT DO
NOTHING``, so two processes reading a new conversation at once seed it once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from core.kernel.postprocess.activations import Activation
from core.kernel.session_schema import SESSIONS_COMPONENT
from core.storage import ComponentPool

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["PostgresActivationRows"]


class PostgresActivationRows:
    """``hearth_post_activations`` and ``hearth_post_defaults`` through the process's pool."""

    shared = True

    def __init__(self, storage: StorageSettings) -> None:
        self.storage = storage
        self._pools = ComponentPool(storage, [SESSIONS_COMPONENT], "the PostgreSQL activations are")

    @property
    def pool(self) -> Any:
        return self._pools.pool

    async def open(self) -> None:
        await self._pools.open()

    async def aclose(self) -> None:
        await self._pools.close()

    async def seed_and_read(self, conversation: str, defaults: list[str]) -> tuple[Activation, ...]:
        async with self.pool.acquire() as conn, conn.transaction():
            for processor in defaults:
                given = await conn.fetchval(
                    "INSERT INTO hearth_post_defaults(conversation, processor) VALUES ($1, $2)"
                    " ON CONFLICT DO NOTHING RETURNING 1",
                    conversation,
                    processor,
                )
                if given is not None:  # never given before: activate under its own name
                    await _insert(conn, conversation, Activation(processor, processor), True)
            rows = await conn.fetch(
                "SELECT name, processor, default_param FROM hearth_post_activations"
                " WHERE conversation = $1 ORDER BY id",
                conversation,
            )
        return tuple(Activation(str(n), str(p), None if d is None else str(d)) for n, p, d in rows)

    async def insert(self, conversation: str, activation: Activation) -> None:
        async with self.pool.acquire() as conn:
            await _insert(conn, conversation, activation, False)

    async def rename(self, conversation: str, old: str, new: str) -> None:
        await self.pool.execute(
            "UPDATE hearth_post_activations SET name = $1, updated_at = $2"
            " WHERE conversation = $3 AND name = $4",
            new,
            time.time(),
            conversation,
            old,
        )

    async def delete(self, conversation: str, name: str) -> None:
        await self.pool.execute(
            "DELETE FROM hearth_post_activations WHERE conversation = $1 AND name = $2",
            conversation,
            name,
        )


async def _insert(conn: Any, conversation: str, activation: Activation, if_free: bool) -> None:
    """Insert one activation; with ``if_free`` a name already taken is left as it is
    (a built-in whose name the user gave to another activation stays unseeded)."""
    now = time.time()
    await conn.execute(
        "INSERT INTO hearth_post_activations"
        "(conversation, name, processor, default_param, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)" + (" ON CONFLICT DO NOTHING" if if_free else ""),
        conversation,
        activation.name,
        activation.processor,
        activation.default_param,
        now,
        now,
    )
