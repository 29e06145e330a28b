"""The ledger and a conversation's history in PostgreSQL (``storage.backend: postgres``).

``PostgresLedgerSession`` is an SDK ``Session`` (``SessionABC``) with the
same kernel surface as the SQLite ``LedgerSession``: a turn's history items,
its ledger row and the records of the turn (``LedgerWrite.write_postgres``)
are written in one transaction; the ledger row goes in first with ``ON
CONFLICT DO NOTHING``, so of two processes answering the same message only
one commits (the other waits on the key, then finds the earlier reply and
writes nothing). Several kernel processes may serve one conversation over
time, so nothing is cached between calls: history is read back every turn.
Tables are created by the ``sessions`` component's migrations
(``core.kernel.conversations.session_schema``); the pool belongs to the caller.

Durability follows ``events.synchronous`` as on SQLite: with ``normal`` a
turn's transaction commits without waiting for the server's disk flush
(``synchronous_commit = off``): it survives any crash of a kernel process
(the server has it) and may lose its last fraction of a second to a crash of
the database server itself, as SQLite's ``NORMAL`` may to a power loss;
``full`` waits for the flush.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents.items import TResponseInputItem
from agents.memory import SessionABC
from agents.memory.session_settings import resolve_session_limit

from core.kernel.conversations.ledger import (
    LedgerWrite,
    StoredItem,
    StoredReply,
    StoredSize,
    trim_to_user_turn,
)

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresLedgerSession"]

ITEMS = "hearth_session_items"


class PostgresLedgerSession(SessionABC):
    """One session's history and ledger rows in PostgreSQL, through a shared pool."""

    def __init__(self, session_id: str, pool: asyncpg.Pool, *, synchronous: str = "normal") -> None:
        self.session_id = session_id
        self.pool = pool
        self.flush = synchronous.lower() == "full"  # wait for the server's disk at commit

    # ------------------------------------------------------------ the SDK's Session

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all with ``None``; else ``session_settings.limit``),
        oldest first. Rows that are not JSON are skipped and do not count, as in
        ``SQLiteSession``; a negative limit means all of them, as there."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is None or limit < 0:
            rows = await self.pool.fetch(
                f"SELECT message_data FROM {ITEMS} WHERE session_id = $1 ORDER BY id",
                self.session_id,
            )
            return _decoded(rows)
        if limit == 0:
            return []
        window = limit
        while True:  # widen the window while undecodable rows hide wanted ones
            rows = await self.pool.fetch(
                f"SELECT message_data FROM {ITEMS} WHERE session_id = $1 ORDER BY id DESC LIMIT $2",
                self.session_id,
                window,
            )
            items = _decoded(list(reversed(rows)))
            if len(items) >= limit or len(rows) < window:
                return items[-limit:]
            window *= 2

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        async with self.pool.acquire() as conn, conn.transaction():
            await self._insert_items(conn, items)

    async def pop_item(self) -> TResponseInputItem | None:
        while True:
            data = await self.pool.fetchval(
                f"DELETE FROM {ITEMS} WHERE id = (SELECT id FROM {ITEMS} WHERE session_id = $1"
                " ORDER BY id DESC LIMIT 1) RETURNING message_data",
                self.session_id,
            )
            if data is None:
                return None
            try:
                item: TResponseInputItem = json.loads(data)
            except (json.JSONDecodeError, TypeError):
                continue
            return item

    async def clear_session(self) -> None:
        await self.pool.execute(f"DELETE FROM {ITEMS} WHERE session_id = $1", self.session_id)

    def close(self) -> None:
        """Nothing to close: connections belong to the pool."""

    # ------------------------------------------------------------ the kernel's ledger

    async def history(self, limit: int | None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all with ``None``), starting at a user message."""
        return trim_to_user_turn(await self.get_items(limit))

    async def last_activity(self) -> float | None:
        """When this session last answered a message (epoch seconds), ``None`` if never."""
        value = await self.pool.fetchval(
            "SELECT MAX(created_at) FROM hearth_turns WHERE session_id = $1", self.session_id
        )
        return None if value is None else float(value)

    async def recorded(self, message_key: str) -> StoredReply | None:
        """The stored reply to ``message_key``, if that message was answered before."""
        async with self.pool.acquire() as conn:
            return await _select_reply(conn, message_key)

    async def commit_turn(
        self,
        reply: StoredReply,
        items: list[TResponseInputItem],
        extra: Sequence[LedgerWrite] = (),
    ) -> StoredReply:
        """Store ``items``, the ledger row and ``extra`` in one transaction; return what
        is stored (the earlier reply when the message was answered already)."""
        async with self.pool.acquire() as conn:
            async with conn.transaction():
                await self._durability(conn)
                inserted = await conn.fetchval(
                    "INSERT INTO hearth_turns"
                    "(message_key, session_id, channel_id, user_id, reply, created_at, followup)"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7)"
                    " ON CONFLICT (message_key) DO NOTHING RETURNING 1",
                    reply.message_key,
                    self.session_id,
                    reply.channel_id,
                    reply.user_id,
                    reply.text,
                    time.time(),
                    reply.followup,
                )
                if inserted is not None:
                    if items:
                        await self._insert_items(conn, items)
                    for record in extra:
                        await record.write_postgres(conn)
                    return reply
            earlier = await _select_reply(conn, reply.message_key)
        if earlier is None:  # pruned between the two statements: nothing else can remove it
            raise RuntimeError(f"ledger row {reply.message_key!r} vanished while read")
        return earlier

    async def stored_size(self) -> StoredSize:
        """The whole stored history's size (no item is decoded)."""
        row = await self.pool.fetchrow(
            f"SELECT COUNT(*), COALESCE(SUM(LENGTH(message_data)), 0) FROM {ITEMS}"
            " WHERE session_id = $1",
            self.session_id,
        )
        assert row is not None
        return StoredSize(int(row[0]), int(row[1]))

    async def stored_items(self) -> list[StoredItem]:
        """Every stored item, oldest first, with its row id (undecodable rows skipped)."""
        rows = await self.pool.fetch(
            f"SELECT id, message_data FROM {ITEMS} WHERE session_id = $1 ORDER BY id",
            self.session_id,
        )
        items: list[StoredItem] = []
        for row_id, data in rows:
            try:
                item = json.loads(data)
            except (json.JSONDecodeError, TypeError):
                continue
            if isinstance(item, dict):
                items.append(StoredItem(int(row_id), item, len(data)))
        return items

    async def replace_oldest(
        self, through_id: int, newest_id: int, summary: dict[str, Any] | None
    ) -> bool:
        """Replace the items up to row ``through_id`` with ``summary`` (or nothing), in
        one transaction; ``False`` (nothing changed) when the history moved since read.
        The session's rows are locked first, so a turn committing meanwhile waits."""
        async with self.pool.acquire() as conn, conn.transaction():
            await self._durability(conn)
            ids = await conn.fetch(
                f"SELECT id FROM {ITEMS} WHERE session_id = $1 ORDER BY id FOR UPDATE",
                self.session_id,
            )
            present = {int(r[0]) for r in ids}
            if not ids or int(ids[-1][0]) != newest_id or through_id not in present:
                return False
            if summary is None:
                await conn.execute(
                    f"DELETE FROM {ITEMS} WHERE session_id = $1 AND id <= $2",
                    self.session_id,
                    through_id,
                )
            else:
                await conn.execute(
                    f"UPDATE {ITEMS} SET message_data = $1 WHERE id = $2",
                    json.dumps(summary),
                    through_id,
                )
                await conn.execute(
                    f"DELETE FROM {ITEMS} WHERE session_id = $1 AND id < $2",
                    self.session_id,
                    through_id,
                )
        return True

    async def _durability(self, conn: asyncpg.Connection) -> None:
        """``events.synchronous: normal``: this transaction commits without the flush."""
        if not self.flush:
            await conn.execute("SET LOCAL synchronous_commit = off")

    async def _insert_items(
        self, conn: asyncpg.Connection, items: list[TResponseInputItem]
    ) -> None:
        await conn.executemany(
            f"INSERT INTO {ITEMS} (session_id, message_data) VALUES ($1, $2)",
            [(self.session_id, json.dumps(item)) for item in items],
        )


async def _select_reply(conn: asyncpg.Connection, message_key: str) -> StoredReply | None:
    row = await conn.fetchrow(
        "SELECT channel_id, user_id, reply, followup FROM hearth_turns WHERE message_key = $1",
        message_key,
    )
    return None if row is None else StoredReply(message_key, *row)


def _decoded(rows: Sequence[Any]) -> list[TResponseInputItem]:
    items: list[TResponseInputItem] = []
    for (data,) in rows:
        try:
            items.append(json.loads(data))
        except (json.JSONDecodeError, TypeError):
            continue
    return items
