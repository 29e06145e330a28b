"""The per-message ledger: a turn's outcome is written once, with its history.

Every ``user.message`` the kernel answers leaves one row in ``hearth_turns``,
keyed by the message, holding the reply. The new history items of a model
turn are inserted in the *same transaction* as that row. So after any crash
the history holds the exchange either completely and once (row present) or
not at all (row absent), and a redelivered message finds its reply here
instead of calling the model again (ADR 0014). A compaction replaces the
oldest items with one summary item in one transaction too (``replace_oldest``,
ADR 0020). A reply may have a follow-up message (answer post-processors, ADR
0023), recorded in the same row, and other records of the turn
(``LedgerWrite``: usage, post-processing) are written in the same transaction.

``LedgerSession`` is written once against the storage layer (ADR 0051, 0062):
``sessions.db`` or PostgreSQL's ``sessions`` component. The history items
live in the SDK's own ``agent_messages`` table on SQLite (where the SDK's
``SQLiteSession`` kept them, so a user's history is read as it is) and in
``hearth_session_items`` on PostgreSQL (ADR 0035).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agents.items import TResponseInputItem
from agents.memory import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

from core.storage import Database, Dialect, DuplicateKeyError, Executor, for_update

__all__ = [
    "ConversationSession",
    "LedgerSession",
    "LedgerWrite",
    "StoredItem",
    "StoredReply",
    "StoredSize",
    "items_table",
    "trim_to_user_turn",
]


class LedgerWrite(Protocol):
    """Another record of the turn, written inside the ledger's transaction."""

    async def write_to(self, tx: Executor) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredReply:
    """The answer to one message, as recorded: what delivery sends (and re-sends),
    the answer then, when there is one, the follow-up message; ``sent``: it was
    handed to its channel (or journaled for its retries) before."""

    message_key: str
    channel_id: str
    user_id: str
    text: str
    followup: str | None = None
    sent: bool = False


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
    """What the kernel asks of a conversation's session (``LedgerSession``; tests'
    stand-ins)."""

    session_id: str

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]: ...

    async def history(self, limit: int | None) -> list[TResponseInputItem]: ...

    async def last_activity(self) -> float | None: ...

    async def recorded(self, message_key: str) -> StoredReply | None: ...

    async def mark_sent(self, message_key: str) -> None: ...

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


def items_table(dialect: Dialect) -> str:
    """Where a session's history items are: the SDK's ``agent_messages`` in
    ``sessions.db``, ``hearth_session_items`` in PostgreSQL."""
    return "agent_messages" if dialect == "sqlite" else "hearth_session_items"


_TURN = (
    "INSERT INTO hearth_turns"
    "(message_key, session_id, channel_id, user_id, reply, created_at, followup)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# the SDK's row per session (SQLite only: its ``agent_messages`` rows refer to it)
_SDK_SESSION = (
    "INSERT INTO agent_sessions (session_id) VALUES (?)"
    " ON CONFLICT (session_id) DO UPDATE SET updated_at = CURRENT_TIMESTAMP"
)


class LedgerSession(SessionABC):
    """One session's history and ledger rows: an SDK ``Session`` with the kernel's
    turn-at-once writes.

    Reading history is the SDK's ``get_items``; the kernel writes only through
    ``commit_turn`` (it runs the model without a session, so the SDK never writes
    half a turn). When no other process writes the database (SQLite: the kernel
    is its only writer, under the conversation's lock), ``history`` and
    ``last_activity`` are kept in memory after the first read instead of read
    back every turn; on PostgreSQL another process may have answered the
    conversation meanwhile, so they are read back each time.
    """

    def __init__(
        self, session_id: str, db: Database, session_settings: SessionSettings | None = None
    ) -> None:
        self.session_id = session_id
        self.db = db
        self.session_settings = session_settings or SessionSettings()
        self.items = items_table(db.dialect)
        self._tail: list[TResponseInputItem] | None = None
        self._tail_limit: int | None = None
        self._last_at: float | None = None  # cached last_activity (0.0: never)

    # ------------------------------------------------------------ the SDK's Session

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all with ``None``; else ``session_settings.limit``),
        oldest first. Rows that are not JSON are skipped and do not count, as in the
        SDK's ``SQLiteSession``; a negative limit means all of them, as there."""
        limit = resolve_session_limit(limit, self.session_settings)
        select = f"SELECT message_data FROM {self.items} WHERE session_id = ?"
        if limit is None or limit < 0:
            return _decoded(await self.db.fetch_all(select + " ORDER BY id", self.session_id))
        if limit == 0:
            return []
        window = limit
        while True:  # widen the window while undecodable rows hide wanted ones
            rows = await self.db.fetch_all(
                select + " ORDER BY id DESC LIMIT ?", self.session_id, window
            )
            items = _decoded(list(reversed(rows)))
            if len(items) >= limit or len(rows) < window:
                return items[-limit:]
            window *= 2

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        async with self.db.transaction() as tx:
            await self._insert_items(tx, items)
        self._tail = None

    async def pop_item(self) -> TResponseInputItem | None:
        self._tail = None
        while True:
            data = await self.db.fetch_value(
                f"DELETE FROM {self.items} WHERE id = (SELECT id FROM {self.items}"
                " WHERE session_id = ? ORDER BY id DESC LIMIT 1) RETURNING message_data",
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
        self._tail = None
        async with self.db.transaction() as tx:
            await tx.write(f"DELETE FROM {self.items} WHERE session_id = ?", self.session_id)
            if tx.dialect == "sqlite":
                await tx.write("DELETE FROM agent_sessions WHERE session_id = ?", self.session_id)

    def close(self) -> None:
        """Nothing to close: the connection belongs to the database."""

    # ------------------------------------------------------------ the kernel's ledger

    async def history(self, limit: int | None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all with ``None``), starting at a user message."""
        if self.db.shared:
            return trim_to_user_turn(await self.get_items(limit))
        if self._tail is None or self._tail_limit != limit:
            self._tail = await self.get_items(limit)
            self._tail_limit = limit
        return trim_to_user_turn(self._tail)

    async def last_activity(self) -> float | None:
        """When this session last answered a message (epoch seconds), ``None`` if never."""
        if self._last_at is None or self.db.shared:
            value = await self.db.fetch_value(
                "SELECT MAX(created_at) FROM hearth_turns WHERE session_id = ?", self.session_id
            )
            self._last_at = 0.0 if value is None else float(value)
        return self._last_at or None

    async def recorded(self, message_key: str) -> StoredReply | None:
        """The stored reply to ``message_key``, if that message was answered before."""
        row = await self.db.fetch_one(
            "SELECT channel_id, user_id, reply, followup, sent_at IS NOT NULL"
            " FROM hearth_turns WHERE message_key = ?",
            message_key,
        )
        if row is None:
            return None
        channel_id, user_id, text, followup, sent = row
        return StoredReply(message_key, channel_id, user_id, text, followup, bool(sent))

    async def mark_sent(self, message_key: str) -> None:
        """The reply to ``message_key`` was handed over: a redelivery of the message
        (its process died before the bus heard it was done) sends nothing again."""
        await self.db.write(
            "UPDATE hearth_turns SET sent_at = ? WHERE message_key = ?", time.time(), message_key
        )

    async def commit_turn(
        self,
        reply: StoredReply,
        items: list[TResponseInputItem],
        extra: Sequence[LedgerWrite] = (),
    ) -> StoredReply:
        """Store ``items``, the ledger row and ``extra`` in one transaction; return
        what is stored.

        The ledger row goes in first and nothing is read before ``COMMIT``, so on
        SQLite the whole turn is one hop to the database's thread. When the row
        exists already (the message was answered before a crash or a redelivery;
        on PostgreSQL, by another process that committed first), its key refuses
        the insert, the transaction is rolled back and the earlier reply returned.
        """
        now = time.time()
        try:
            async with self.db.transaction() as tx:
                await tx.write(
                    _TURN,
                    reply.message_key,
                    self.session_id,
                    reply.channel_id,
                    reply.user_id,
                    reply.text,
                    now,
                    reply.followup,
                )
                await self._insert_items(tx, items)
                for record in extra:
                    await record.write_to(tx)
        except DuplicateKeyError:
            earlier = await self.recorded(reply.message_key)
            if earlier is None:  # another key was broken: not the ledger's to explain
                raise
            self._tail = None  # written by the earlier attempt: read it back next time
            return earlier
        self._last_at = now
        if self._tail is not None and items:
            self._tail = self._tail + list(items)
            if self._tail_limit is not None:
                self._tail = self._tail[-self._tail_limit :]
        return reply

    async def stored_size(self) -> StoredSize:
        """The whole stored history's size, counted by the database (nothing decoded)."""
        row = await self.db.fetch_one(
            f"SELECT COUNT(*), COALESCE(SUM(LENGTH(message_data)), 0) FROM {self.items}"
            " WHERE session_id = ?",
            self.session_id,
        )
        return StoredSize(0, 0) if row is None else StoredSize(int(row[0]), int(row[1]))

    async def stored_items(self) -> list[StoredItem]:
        """Every stored item, oldest first, with its row id (undecodable rows skipped,
        as ``get_items`` skips them)."""
        rows = await self.db.fetch_all(
            f"SELECT id, message_data FROM {self.items} WHERE session_id = ? ORDER BY id",
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
        """Replace the items up to row ``through_id`` with ``summary`` (or nothing).

        One transaction: the summary takes the place of row ``through_id`` (so it
        sorts before every kept item) and the rows before it are deleted; after a
        crash the history is the old one or the new one. Nothing is changed
        (``False``) when the history moved since it was read: its newest row is no
        longer ``newest_id`` or row ``through_id`` is gone. The session's rows are
        locked first (PostgreSQL), so a turn committing meanwhile waits.
        """
        self._tail = None  # read back next time, whatever happens below
        async with self.db.transaction() as tx:
            ids = [
                int(row[0])
                for row in await tx.fetch_all(
                    f"SELECT id FROM {self.items} WHERE session_id = ?"
                    f" ORDER BY id{for_update(tx.dialect)}",
                    self.session_id,
                )
            ]
            if not ids or ids[-1] != newest_id or through_id not in ids:
                return False
            keep = "<="
            if summary is not None:
                keep = "<"
                await tx.write(
                    f"UPDATE {self.items} SET message_data = ? WHERE id = ?",
                    json.dumps(summary),
                    through_id,
                )
            await tx.write(
                f"DELETE FROM {self.items} WHERE session_id = ? AND id {keep} ?",
                self.session_id,
                through_id,
            )
        return True

    async def _insert_items(self, tx: Executor, items: list[TResponseInputItem]) -> None:
        """Items stored as the SDK stores them (``json.dumps`` of each)."""
        if not items:
            return
        if tx.dialect == "sqlite":
            await tx.write(_SDK_SESSION, self.session_id)
        await tx.execute_many(
            f"INSERT INTO {self.items} (session_id, message_data) VALUES (?, ?)",
            [(self.session_id, json.dumps(item)) for item in items],
        )


def _decoded(rows: Sequence[Sequence[Any]]) -> list[TResponseInputItem]:
    items: list[TResponseInputItem] = []
    for (data,) in rows:
        try:
            items.append(json.loads(data))
        except (json.JSONDecodeError, TypeError):
            continue
    return items


def trim_to_user_turn(items: list[TResponseInputItem]) -> list[TResponseInputItem]:
    """Drop leading items until a user message (or a turn's kept note before one, ADR
    0097): a history cut at ``history_max_items`` must not start with a tool result
    whose call was cut off (the API rejects it)."""
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") in ("user", "system"):
            return items[index:]
    return []
