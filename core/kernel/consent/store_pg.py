"""Paused turns, questions and "always allow" grants in PostgreSQL (ADR 0035).

The same rows and guarantees as ``ApprovalStore`` in ``sessions.db``: a
paused turn and its questions are stored in one transaction before anyone
is asked, and deciding a question is one conditional update (``pending`` →
a decision), so two answers racing — from two kernel processes too — cannot
both win.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from core.kernel.consent.policy import Grant
from core.kernel.consent.store import (
    RETENTION_S,
    Approval,
    ApprovalStatus,
    PausedTurn,
    TurnStatus,
    approval_of,
    paused_turn_of,
)
from core.kernel.consent.wording import new_request_id
from core.kernel.session_schema import SESSIONS_COMPONENT
from core.storage import ComponentPool

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = ["PostgresApprovals"]

_TURN_COLUMNS = (
    "message_key, message_id, conversation, session_id, channel_id, user_id, owner_id,"
    " input_items, query, state, round, status, updated_at"
)
_APPROVAL_COLUMNS = (
    "id, message_key, round, call_id, tool, arguments, expires_at, status, always, decided_by"
)


class PostgresApprovals:
    """The consent tables of the ``sessions`` component, through the process's pool."""

    def __init__(self, storage: StorageSettings) -> None:
        self.storage = storage
        self._pools = ComponentPool(storage, [SESSIONS_COMPONENT], "the PostgreSQL approvals are")

    @property
    def pool(self) -> Any:
        return self._pools.pool

    async def open(self) -> tuple[list[PausedTurn], list[Grant]]:
        """Migrate, prune finished turns, and read what is still open."""
        await self._pools.open()
        old = time.time() - RETENTION_S
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM hearth_approvals WHERE message_key IN (SELECT message_key FROM"
                " hearth_paused_turns WHERE status = 'done' AND updated_at < $1)",
                old,
            )
            await conn.execute(
                "DELETE FROM hearth_paused_turns WHERE status = 'done' AND updated_at < $1", old
            )
            turns = []
            for row in await conn.fetch(
                f"SELECT {_TURN_COLUMNS} FROM hearth_paused_turns WHERE status != 'done'"
                " ORDER BY seq"
            ):
                turn = paused_turn_of(tuple(row))
                questions = await conn.fetch(
                    f"SELECT {_APPROVAL_COLUMNS} FROM hearth_approvals"
                    " WHERE message_key = $1 AND round = $2 ORDER BY created_at, id",
                    turn.message_key,
                    turn.round,
                )
                turns.append(replace(turn, approvals=tuple(approval_of(q) for q in questions)))
            grants = [
                Grant(str(t), str(b), str(c), float(at))
                for t, b, c, at in await conn.fetch(
                    "SELECT tool, granted_by, channel_id, created_at FROM hearth_policy_grants"
                )
            ]
        return turns, grants

    async def save(self, turn: PausedTurn, asked: list[Approval]) -> PausedTurn:
        """Store the paused turn (a new round replaces the last) and its questions."""
        async with self.pool.acquire() as conn, conn.transaction():
            approvals = []
            for approval in asked:
                new_id = approval.id
                while await conn.fetchval("SELECT 1 FROM hearth_approvals WHERE id = $1", new_id):
                    new_id = new_request_id()
                approvals.append(replace(approval, id=new_id))
            await conn.execute(
                "INSERT INTO hearth_paused_turns(message_key, message_id, conversation,"
                " session_id, channel_id, user_id, owner_id, input_items, query, state, round,"
                " status, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
                " 'paused', $12) ON CONFLICT (message_key) DO UPDATE SET state = excluded.state,"
                " round = excluded.round, status = 'paused', updated_at = excluded.updated_at",
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
            )
            now = time.time()
            for a in approvals:
                await conn.execute(
                    "INSERT INTO hearth_approvals(id, message_key, round, call_id, tool,"
                    " arguments, status, always, created_at, expires_at)"
                    " VALUES ($1, $2, $3, $4, $5, $6, 'pending', false, $7, $8)",
                    a.id,
                    a.message_key,
                    a.round,
                    a.call_id,
                    a.tool,
                    json.dumps(a.arguments),
                    now,
                    a.expires_at,
                )
        return replace(turn, status="paused", approvals=tuple(approvals))

    async def decide(
        self, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False
    ) -> bool:
        """``pending`` → ``status``; ``False`` when it was decided already."""
        done = await self.pool.fetchval(
            "UPDATE hearth_approvals SET status = $1, decided_by = $2, always = $3,"
            " decided_at = $4 WHERE id = $5 AND status = 'pending' RETURNING 1",
            status,
            decided_by,
            always,
            time.time(),
            approval_id,
        )
        return done is not None

    async def mark(self, message_key: str, status: TurnStatus) -> None:
        await self.pool.execute(
            "UPDATE hearth_paused_turns SET status = $1, updated_at = $2 WHERE message_key = $3",
            status,
            time.time(),
            message_key,
        )

    async def grant(self, grant: Grant) -> None:
        await self.pool.execute(
            "INSERT INTO hearth_policy_grants(tool, granted_by, channel_id, created_at)"
            " VALUES ($1, $2, $3, $4) ON CONFLICT (tool) DO UPDATE SET"
            " granted_by = excluded.granted_by, channel_id = excluded.channel_id,"
            " created_at = excluded.created_at",
            grant.tool,
            grant.granted_by,
            grant.channel_id,
            grant.created_at,
        )

    async def revoke(self, tool: str) -> bool:
        gone = await self.pool.fetchval(
            "DELETE FROM hearth_policy_grants WHERE tool = $1 RETURNING 1", tool
        )
        return gone is not None

    async def aclose(self) -> None:
        await self._pools.close()
