"""Paused turns, their questions and the "always allow" answers, in ``sessions.db``.

A turn paused for the user's approval is written here *before* anyone is
asked: the SDK's ``RunState`` (JSON), the input items the turn will store in
the history, who may answer, and one row per question (short id, tool, final
arguments, status, expiry). Deciding a question is one conditional update
(``pending`` → a decision), so two answers racing each other cannot both
win. Writes use the journal's durability (``events.synchronous``). Rows of
finished turns are pruned after 30 days. The desk uses an ``Approvals``:
``SQLiteApprovals`` (this store in a worker thread) or ``PostgresApprovals``
(``store_pg``, ADR 0035).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from core.kernel.consent.policy import Grant
from core.kernel.consent.wording import new_request_id

__all__ = [
    "RETENTION_S",
    "Approval",
    "ApprovalStatus",
    "ApprovalStore",
    "Approvals",
    "PausedTurn",
    "SQLiteApprovals",
    "TurnStatus",
    "approval_of",
    "paused_turn_of",
]

ApprovalStatus = Literal["pending", "approved", "denied", "timeout", "superseded"]
TurnStatus = Literal["paused", "resuming", "done"]
RETENTION_S = 30 * 86400.0  # finished turns' rows are kept this long

_DDL = (
    "CREATE TABLE IF NOT EXISTS hearth_paused_turns ("
    " message_key TEXT PRIMARY KEY, message_id INTEGER NOT NULL, conversation TEXT NOT NULL,"
    " session_id TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,"
    " owner_id TEXT NOT NULL, input_items TEXT NOT NULL, query TEXT NOT NULL,"
    " state TEXT NOT NULL, round INTEGER NOT NULL, status TEXT NOT NULL,"
    " updated_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hearth_approvals ("
    " id TEXT PRIMARY KEY, message_key TEXT NOT NULL, round INTEGER NOT NULL,"
    " call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL, status TEXT NOT NULL,"
    " always INTEGER NOT NULL, decided_by TEXT, created_at REAL NOT NULL,"
    " expires_at REAL NOT NULL, decided_at REAL)",
    "CREATE TABLE IF NOT EXISTS hearth_policy_grants ("
    " tool TEXT PRIMARY KEY, granted_by TEXT NOT NULL, channel_id TEXT NOT NULL,"
    " created_at REAL NOT NULL)",
)


@dataclass(frozen=True, slots=True)
class Approval:
    """One question: a tool call of a paused turn waiting for (or given) an answer."""

    id: str
    message_key: str
    round: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    expires_at: float
    status: ApprovalStatus = "pending"
    always: bool = False
    decided_by: str | None = None


@dataclass(frozen=True, slots=True)
class PausedTurn:
    """A turn stopped for the user's approval, as stored."""

    message_key: str
    message_id: int  # the user.message event (the reply's outbox key)
    conversation: str
    session_id: str
    channel_id: str
    user_id: str
    owner_id: str  # who may answer: the message's sender (a group member) or the user
    input_items: list[dict[str, Any]]
    query: dict[str, Any]  # the post-processors the message asked for (PostQuery)
    state: dict[str, Any]  # the SDK's RunState.to_json()
    round: int = 1
    status: TurnStatus = "paused"
    approvals: tuple[Approval, ...] = field(default=())


class Approvals(Protocol):
    """What the approval desk stores (every method durable when it returns)."""

    async def open(self) -> tuple[list[PausedTurn], list[Grant]]: ...

    async def save(self, turn: PausedTurn, asked: list[Approval]) -> PausedTurn: ...

    async def decide(
        self, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False
    ) -> bool: ...

    async def mark(self, message_key: str, status: TurnStatus) -> None: ...

    async def grant(self, grant: Grant) -> None: ...

    async def revoke(self, tool: str) -> bool: ...

    async def aclose(self) -> None: ...


class SQLiteApprovals:
    """``ApprovalStore`` (``sessions.db``) with each call in a worker thread."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store

    async def open(self) -> tuple[list[PausedTurn], list[Grant]]:
        return await asyncio.to_thread(self.store.open)

    async def save(self, turn: PausedTurn, asked: list[Approval]) -> PausedTurn:
        return await asyncio.to_thread(self.store.save, turn, asked)

    async def decide(
        self, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False
    ) -> bool:
        return await asyncio.to_thread(self.store.decide, approval_id, status, decided_by, always)

    async def mark(self, message_key: str, status: TurnStatus) -> None:
        await asyncio.to_thread(self.store.mark, message_key, status)

    async def grant(self, grant: Grant) -> None:
        await asyncio.to_thread(self.store.grant, grant)

    async def revoke(self, tool: str) -> bool:
        return await asyncio.to_thread(self.store.revoke, tool)

    async def aclose(self) -> None:
        """Nothing held: each call opens and closes its connection."""


class ApprovalStore:
    """Blocking SQLite access; the caller runs each method in a worker thread."""

    def __init__(self, db_path: Path, *, synchronous: str = "normal") -> None:
        self.db_path = db_path
        self.synchronous = synchronous.upper()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with closing(sqlite3.connect(self.db_path, isolation_level=None)) as conn:
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conn.execute("PRAGMA busy_timeout=5000")
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    # ------------------------------------------------------------ reading

    def open(self) -> tuple[list[PausedTurn], list[Grant]]:
        """Create the tables, prune finished turns, and read what is still open."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._transaction() as conn:
            for statement in _DDL:
                conn.execute(statement)
            old = time.time() - RETENTION_S
            conn.execute(
                "DELETE FROM hearth_approvals WHERE message_key IN (SELECT message_key FROM"
                " hearth_paused_turns WHERE status = 'done' AND updated_at < ?)",
                (old,),
            )
            conn.execute(
                "DELETE FROM hearth_paused_turns WHERE status = 'done' AND updated_at < ?", (old,)
            )
            turns = [
                self._with_approvals(conn, paused_turn_of(row))
                for row in conn.execute(
                    "SELECT * FROM hearth_paused_turns WHERE status != 'done' ORDER BY rowid"
                )
            ]
            grants = [
                Grant(str(t), str(b), str(c), float(at))
                for t, b, c, at in conn.execute(
                    "SELECT tool, granted_by, channel_id, created_at FROM hearth_policy_grants"
                )
            ]
        return turns, grants

    @staticmethod
    def _with_approvals(conn: sqlite3.Connection, turn: PausedTurn) -> PausedTurn:
        rows = conn.execute(
            "SELECT id, message_key, round, call_id, tool, arguments, expires_at, status, always,"
            " decided_by FROM hearth_approvals WHERE message_key = ? AND round = ?"
            " ORDER BY created_at, id",
            (turn.message_key, turn.round),
        ).fetchall()
        return replace(turn, approvals=tuple(approval_of(row) for row in rows))

    # ------------------------------------------------------------ writing

    def save(self, turn: PausedTurn, asked: list[Approval]) -> PausedTurn:
        """Store the paused turn (a new round replaces the last) and its questions,
        giving each question an id no other question has; returns what is stored."""
        with self._transaction() as conn:
            approvals = []
            for approval in asked:
                new_id = approval.id
                while conn.execute(
                    "SELECT 1 FROM hearth_approvals WHERE id = ?", (new_id,)
                ).fetchone():
                    new_id = new_request_id()
                approvals.append(replace(approval, id=new_id))
            conn.execute(
                "INSERT INTO hearth_paused_turns(message_key, message_id, conversation,"
                " session_id, channel_id, user_id, owner_id, input_items, query, state, round,"
                " status, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'paused', ?)"
                " ON CONFLICT(message_key) DO UPDATE SET state = excluded.state,"
                " round = excluded.round, status = 'paused', updated_at = excluded.updated_at",
                (
                    turn.message_key,
                    turn.message_id,
                    turn.conversation,
                    turn.session_id,
                    turn.channel_id,
                    turn.user_id,
                    turn.owner_id,
                    json.dumps(turn.input_items),
                    json.dumps(turn.query),
                    json.dumps(turn.state),
                    turn.round,
                    time.time(),
                ),
            )
            now = time.time()
            for a in approvals:
                conn.execute(
                    "INSERT INTO hearth_approvals(id, message_key, round, call_id, tool,"
                    " arguments, status, always, created_at, expires_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)",
                    (
                        a.id,
                        a.message_key,
                        a.round,
                        a.call_id,
                        a.tool,
                        json.dumps(a.arguments),
                        now,
                        a.expires_at,
                    ),
                )
        return replace(turn, status="paused", approvals=tuple(approvals))

    def decide(
        self, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False
    ) -> bool:
        """``pending`` → ``status``; ``False`` when it was decided already."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE hearth_approvals SET status = ?, decided_by = ?, always = ?,"
                " decided_at = ? WHERE id = ? AND status = 'pending'",
                (status, decided_by, int(always), time.time(), approval_id),
            )
            return cursor.rowcount == 1

    def mark(self, message_key: str, status: TurnStatus) -> None:
        with self._transaction() as conn:
            conn.execute(
                "UPDATE hearth_paused_turns SET status = ?, updated_at = ? WHERE message_key = ?",
                (status, time.time(), message_key),
            )

    def grant(self, grant: Grant) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO hearth_policy_grants(tool, granted_by, channel_id,"
                " created_at) VALUES (?, ?, ?, ?)",
                (grant.tool, grant.granted_by, grant.channel_id, grant.created_at),
            )

    def revoke(self, tool: str) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute("DELETE FROM hearth_policy_grants WHERE tool = ?", (tool,))
            return cursor.rowcount == 1


def paused_turn_of(row: Any) -> PausedTurn:
    """A ``hearth_paused_turns`` row (its columns in table order) as a ``PausedTurn``."""
    (
        key,
        message_id,
        conversation,
        session_id,
        channel_id,
        user_id,
        owner_id,
        items,
        query,
        state,
        round_,
        status,
        _updated,
    ) = row
    return PausedTurn(
        str(key),
        int(message_id),
        str(conversation),
        str(session_id),
        str(channel_id),
        str(user_id),
        str(owner_id),
        json.loads(items),
        json.loads(query),
        json.loads(state),
        int(round_),
        status,
    )


def approval_of(row: Any) -> Approval:
    """A ``hearth_approvals`` row (the columns ``open`` selects) as an ``Approval``."""
    (approval_id, key, round_, call_id, tool, arguments, expires_at, status, always, decided_by) = (
        row
    )
    return Approval(
        str(approval_id),
        str(key),
        int(round_),
        str(call_id),
        str(tool),
        json.loads(arguments),
        float(expires_at),
        status,
        bool(always),
        decided_by,
    )
