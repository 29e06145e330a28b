"""The per-message ledger: a turn's outcome is written once, with its history.

Every ``user.message`` the kernel answers leaves one row in ``hearth_turns``
(in ``sessions.db``), keyed by the message, holding the reply. The new
history items of a model turn are inserted into the SDK's own tables in the
*same transaction* as that row. So after any crash the history holds the
exchange either completely and once (row present) or not at all (row
absent), and a redelivered message finds its reply here instead of calling
the model again (ADR 0014). A compaction replaces the oldest items with one
summary item in one transaction too (``replace_oldest``, ADR 0020). A reply
may have a follow-up message (answer post-processors, ADR 0023), recorded in
the same row, and other records of the turn (``LedgerWrite``) are written in
the same transaction.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents.items import TResponseInputItem
from agents.memory import SQLiteSession

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "ConversationSession",
    "LedgerSession",
    "LedgerWrite",
    "StoredItem",
    "StoredReply",
    "StoredSize",
    "trim_to_user_turn",
]


class LedgerWrite(Protocol):
    """Another record of the turn, written inside the ledger's transaction (SQLite's,
    or PostgreSQL's with ``storage.backend: postgres``)."""

    def write(self, conn: sqlite3.Connection) -> None: ...

    async def write_postgres(self, conn: asyncpg.Connection) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredReply:
    """The answer to one message, as recorded: what delivery sends (and re-sends),
    the answer then, when there is one, the follow-up message."""

    message_key: str
    channel_id: str
    user_id: str
    text: str
    followup: str | None = None


@dataclass(frozen=True, slots=True)
class StoredItem:
    """One stored history item, its row id (its place in the history) and the
    length of its stored JSON (what the token estimate counts)."""

    row_id: int
    item: dict[str, Any]
    chars: int


@dataclass(frozen=True, slots=True)
class StoredSize:
    """How much history a session holds: rows and characters of stored JSON."""

    items: int
    chars: int


class ConversationSession(Protocol):
    """What the kernel asks of a conversation's session, whichever backend holds it:
    ``LedgerSession`` (SQLite) or ``PostgresLedgerSession`` (ADR 0035)."""

    session_id: str

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]: ...

    async def history(self, limit: int | None) -> list[TResponseInputItem]: ...

    async def last_activity(self) -> float | None: ...

    async def recorded(self, message_key: str) -> StoredReply | None: ...

    async def commit_turn(
        self,
        reply: StoredReply,
        items: list[TResponseInputItem],
        extra: Sequence[LedgerWrite] = (),
    ) -> StoredReply: ...

    async def stored_size(self) -> StoredSize: ...

    async def stored_items(self) -> list[StoredItem]: ...

    async def replace_oldest(
        self, through_id: int, newest_id: int, summary: dict[str, Any] | None
    ) -> bool: ...

    def close(self) -> None: ...


class LedgerSession(SQLiteSession):
    """An SDK ``SQLiteSession`` that also records turns atomically with their items.

    Reading history is the SDK's ``get_items``; writing goes only through
    ``commit_turn`` (the kernel runs the model without a session, so the SDK
    never writes half a turn on its own). The kernel is the only writer of a
    conversation's session, under the conversation's lock, so ``history``
    keeps the latest items in memory after the first read instead of reading
    them back every turn. Writing uses the parent's protected helpers
    (``_write_connection``, ``_insert_items``) — the subclass's business — so
    items are stored exactly as ``SQLiteSession.add_items`` stores them.
    """

    synchronous = "NORMAL"  # like the journal (events.synchronous): FULL also survives power loss

    _tail: list[TResponseInputItem] | None = None
    _last_at: float | None = None  # cached last_activity (0.0: never)
    _tail_limit: int | None = None

    async def history(self, limit: int | None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all with ``None``), starting at a user message."""
        if self._tail is None or self._tail_limit != limit:
            self._tail = await self.get_items(limit)
            self._tail_limit = limit
        return trim_to_user_turn(self._tail)

    async def last_activity(self) -> float | None:
        """When this session last answered a message (epoch seconds), ``None`` if never."""
        if self._last_at is None:
            self._last_at = await asyncio.to_thread(self._read_last_activity)
        return self._last_at or None

    def _read_last_activity(self) -> float:
        with self._locked_connection() as conn:
            row = conn.execute(
                "SELECT MAX(created_at) FROM hearth_turns WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
        return float(row[0]) if row and row[0] is not None else 0.0

    async def recorded(self, message_key: str) -> StoredReply | None:
        """The stored reply to ``message_key``, if that message was answered before."""
        return await asyncio.to_thread(self._read_reply, message_key)

    async def commit_turn(
        self,
        reply: StoredReply,
        items: list[TResponseInputItem],
        extra: Sequence[LedgerWrite] = (),
    ) -> StoredReply:
        """Store ``items``, the ledger row and ``extra`` in one transaction; return
        what is stored.

        When the row already exists (the message was answered before a crash
        or a redelivery), nothing is written and the earlier reply is returned.
        """
        stored = await asyncio.to_thread(self._commit, reply, items, extra)
        if stored is not reply:
            self._tail = None  # written by an earlier attempt: read it back next time
        elif self._tail is not None and items:
            self._tail = self._tail + list(items)
            if self._tail_limit is not None:
                self._tail = self._tail[-self._tail_limit :]
        return stored

    async def stored_size(self) -> StoredSize:
        """The whole stored history's size, counted by SQLite (no item is decoded)."""
        return await asyncio.to_thread(self._read_size)

    async def stored_items(self) -> list[StoredItem]:
        """Every stored item, oldest first, with its row id (undecodable rows skipped,
        as ``get_items`` skips them)."""
        return await asyncio.to_thread(self._read_items)

    async def replace_oldest(
        self, through_id: int, newest_id: int, summary: dict[str, Any] | None
    ) -> bool:
        """Replace the items up to row ``through_id`` with ``summary`` (or nothing).

        One transaction: the summary takes the place of row ``through_id`` (so
        it sorts before every kept item) and the rows before it are deleted;
        after a crash the history is the old one or the new one. Nothing is
        changed (``False``) when the history moved since it was read: its
        newest row is no longer ``newest_id`` or row ``through_id`` is gone.
        """
        self._tail = None  # read back next time, whatever happens below
        return await asyncio.to_thread(self._replace, through_id, newest_id, summary)

    def _read_size(self) -> StoredSize:
        with self._locked_connection() as conn:
            row = conn.execute(
                f"SELECT COUNT(*), COALESCE(SUM(LENGTH(message_data)), 0)"
                f" FROM {self.messages_table} WHERE session_id = ?",
                (self.session_id,),
            ).fetchone()
        return StoredSize(int(row[0]), int(row[1]))

    def _read_items(self) -> list[StoredItem]:
        with self._locked_connection() as conn:
            rows = conn.execute(
                f"SELECT id, message_data FROM {self.messages_table}"
                " WHERE session_id = ? ORDER BY id",
                (self.session_id,),
            ).fetchall()
        items: list[StoredItem] = []
        for row_id, data in rows:
            try:
                item = json.loads(data)
            except (json.JSONDecodeError, TypeError):
                continue
            if isinstance(item, dict):
                items.append(StoredItem(int(row_id), item, len(data)))
        return items

    def _replace(self, through_id: int, newest_id: int, summary: dict[str, Any] | None) -> bool:
        table = self.messages_table
        with self._write_connection() as conn:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            newest = conn.execute(
                f"SELECT MAX(id) FROM {table} WHERE session_id = ?", (self.session_id,)
            ).fetchone()[0]
            present = conn.execute(
                f"SELECT 1 FROM {table} WHERE session_id = ? AND id = ?",
                (self.session_id, through_id),
            ).fetchone()
            if newest != newest_id or present is None:
                conn.rollback()
                return False
            if summary is None:
                conn.execute(
                    f"DELETE FROM {table} WHERE session_id = ? AND id <= ?",
                    (self.session_id, through_id),
                )
            else:
                conn.execute(
                    f"UPDATE {table} SET message_data = ? WHERE id = ?",
                    (json.dumps(summary), through_id),
                )
                conn.execute(
                    f"DELETE FROM {table} WHERE session_id = ? AND id < ?",
                    (self.session_id, through_id),
                )
            conn.commit()
        return True

    def _read_reply(self, message_key: str) -> StoredReply | None:
        with self._locked_connection() as conn:
            return _select_reply(conn, message_key)

    def _commit(
        self, reply: StoredReply, items: list[TResponseInputItem], extra: Sequence[LedgerWrite]
    ) -> StoredReply:
        with self._write_connection() as conn:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("BEGIN IMMEDIATE")
            earlier = _select_reply(conn, reply.message_key)
            if earlier is not None:
                conn.rollback()
                return earlier
            if items:
                self._insert_items(conn, items)
            now = time.time()
            conn.execute(
                "INSERT INTO hearth_turns"
                "(message_key, session_id, channel_id, user_id, reply, created_at, followup)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    reply.message_key,
                    self.session_id,
                    reply.channel_id,
                    reply.user_id,
                    reply.text,
                    now,
                    reply.followup,
                ),
            )
            for record in extra:
                record.write(conn)
            conn.commit()
        self._last_at = now
        return reply


def _select_reply(conn: sqlite3.Connection, message_key: str) -> StoredReply | None:
    row = conn.execute(
        "SELECT channel_id, user_id, reply, followup FROM hearth_turns WHERE message_key = ?",
        (message_key,),
    ).fetchone()
    return None if row is None else StoredReply(message_key, *row)


def trim_to_user_turn(items: list[TResponseInputItem]) -> list[TResponseInputItem]:
    """Drop leading items until a user message: a history cut at ``history_max_items``
    must not start with a tool result whose call was cut off (the API rejects it)."""
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") == "user":
            return items[index:]
    return []
