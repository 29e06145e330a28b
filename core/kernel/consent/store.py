"""Paused turns, their questions and the "always allow" answers, on either database.

A turn paused for the user's approval is written here *before* anyone is
asked: the SDK's ``RunState`` (JSON), the input items the turn will store in
the history, who may answer, and one row per question (short id, tool, final
arguments, status, expiry). Deciding a question is one conditional update
(``pending`` → a decision), so two answers racing each other — from two
kernel processes too — cannot both win. Rows of finished turns are pruned
after 30 days. The tables are the ``sessions`` component's, in
``sessions.db`` (written with the journal's durability,
``events.synchronous``) or in PostgreSQL, through ``core.storage`` (ADR
0035, 0051). On PostgreSQL other kernel processes read and write the same rows
(a channels/workers split, ADR 0102): ``turns`` reads back the open turns a
question, a conversation or a message names, ``grants`` every "always allow".
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from core.kernel.consent.policy import Grant
from core.kernel.consent.wording import new_request_id
from core.storage import Database, Executor, insertion_order, upsert

__all__ = [
    "RETENTION_S",
    "Approval",
    "ApprovalStatus",
    "ApprovalStore",
    "PausedTurn",
    "TurnStatus",
    "approval_of",
    "paused_turn_of",
]

ApprovalStatus = Literal["pending", "approved", "denied", "timeout", "superseded"]
TurnStatus = Literal["paused", "resuming", "done"]
RETENTION_S = 30 * 86400.0  # finished turns' rows are kept this long

_TURN_COLUMNS = (
    "message_key, message_id, conversation, session_id, channel_id, user_id, owner_id,"
    " input_items, query, state, round, status, updated_at"
)
_APPROVAL_COLUMNS = (
    "id, message_key, round, call_id, tool, arguments, expires_at, status, always, decided_by"
)
_SAVE_TURN = (
    f"INSERT INTO hearth_paused_turns({_TURN_COLUMNS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'paused', ?)"
    " ON CONFLICT (message_key) DO UPDATE SET state = excluded.state,"
    " round = excluded.round, status = 'paused', updated_at = excluded.updated_at"
)
_GRANT = upsert(
    "hearth_policy_grants", ("tool", "granted_by", "channel_id", "created_at"), ("tool",)
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


class ApprovalStore:
    """What the approval desk stores; every method is durable when it returns."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # other kernel processes use these rows too (PostgreSQL): read once, asked each turn
        self.shared: bool = db.shared

    async def open(self) -> tuple[list[PausedTurn], list[Grant]]:
        """Open (and migrate), prune finished turns, and read what is still open."""
        await self.db.open()
        old = time.time() - RETENTION_S
        order = insertion_order(self.db.dialect, "seq")
        async with self.db.transaction() as tx:
            await tx.write(
                "DELETE FROM hearth_approvals WHERE message_key IN (SELECT message_key FROM"
                " hearth_paused_turns WHERE status = 'done' AND updated_at < ?)",
                old,
            )
            await tx.write(
                "DELETE FROM hearth_paused_turns WHERE status = 'done' AND updated_at < ?", old
            )
            turns = [
                await _with_approvals(tx, paused_turn_of(row))
                for row in await tx.fetch_all(
                    f"SELECT {_TURN_COLUMNS} FROM hearth_paused_turns WHERE status != 'done'"
                    f" ORDER BY {order}"
                )
            ]
            grants = await _grants(tx)
        return turns, grants

    async def turns(
        self,
        *,
        message_key: str | None = None,
        approval_id: str | None = None,
        conversation: str | None = None,
    ) -> list[PausedTurn]:
        """The open paused turns (with their questions) of the message, of the
        question or of the conversation named, as stored now."""
        where, value = _scope(message_key, approval_id, conversation)
        async with self.db.transaction() as tx:
            return [
                await _with_approvals(tx, paused_turn_of(row))
                for row in await tx.fetch_all(
                    f"SELECT {_TURN_COLUMNS} FROM hearth_paused_turns WHERE {where}"
                    " AND status != 'done'",
                    value,
                )
            ]

    async def grants(self) -> list[Grant]:
        """Every "always allow" answer, as stored now."""
        return await _grants(self.db)

    async def aclose(self) -> None:
        await self.db.close()

    async def save(self, turn: PausedTurn, asked: list[Approval]) -> PausedTurn:
        """Store the paused turn (a new round replaces the last) and its questions,
        giving each question an id no other question has; returns what is stored."""
        async with self.db.transaction() as tx:
            approvals = []
            for approval in asked:
                new_id = approval.id
                while await tx.fetch_one("SELECT 1 FROM hearth_approvals WHERE id = ?", new_id):
                    new_id = new_request_id()
                approvals.append(replace(approval, id=new_id))
            now = time.time()
            await tx.write(
                _SAVE_TURN,
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
                now,
            )
            await tx.execute_many(
                "INSERT INTO hearth_approvals(id, message_key, round, call_id, tool,"
                " arguments, status, always, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
                [
                    (
                        a.id,
                        a.message_key,
                        a.round,
                        a.call_id,
                        a.tool,
                        json.dumps(a.arguments),
                        False,
                        now,
                        a.expires_at,
                    )
                    for a in approvals
                ],
            )
        return replace(turn, status="paused", approvals=tuple(approvals))

    async def decide(
        self, approval_id: str, status: ApprovalStatus, decided_by: str, always: bool = False
    ) -> bool:
        """``pending`` → ``status``; ``False`` when it was decided already."""
        changed = await self.db.execute(
            "UPDATE hearth_approvals SET status = ?, decided_by = ?, always = ?,"
            " decided_at = ? WHERE id = ? AND status = 'pending'",
            status,
            decided_by,
            always,
            time.time(),
            approval_id,
        )
        return changed == 1

    async def mark(self, message_key: str, status: TurnStatus) -> None:
        await self.db.execute(
            "UPDATE hearth_paused_turns SET status = ?, updated_at = ? WHERE message_key = ?",
            status,
            time.time(),
            message_key,
        )

    async def grant(self, grant: Grant) -> None:
        await self.db.execute(
            _GRANT, grant.tool, grant.granted_by, grant.channel_id, grant.created_at
        )

    async def revoke(self, tool: str) -> bool:
        return await self.db.execute("DELETE FROM hearth_policy_grants WHERE tool = ?", tool) == 1


def _scope(
    message_key: str | None, approval_id: str | None, conversation: str | None
) -> tuple[str, str]:
    if message_key is not None:
        return "message_key = ?", message_key
    if approval_id is not None:
        return (
            "message_key IN (SELECT message_key FROM hearth_approvals WHERE id = ?)",
            approval_id.strip().lower(),
        )
    if conversation is not None:
        return "conversation = ?", conversation
    raise ValueError("turns: name a message, a question or a conversation")


async def _grants(tx: Executor) -> list[Grant]:
    rows = await tx.fetch_all(
        "SELECT tool, granted_by, channel_id, created_at FROM hearth_policy_grants"
    )
    return [Grant(str(t), str(b), str(c), float(at)) for t, b, c, at in rows]


async def _with_approvals(tx: Executor, turn: PausedTurn) -> PausedTurn:
    rows = await tx.fetch_all(
        f"SELECT {_APPROVAL_COLUMNS} FROM hearth_approvals WHERE message_key = ? AND round = ?"
        " ORDER BY created_at, id",
        turn.message_key,
        turn.round,
    )
    return replace(turn, approvals=tuple(approval_of(row) for row in rows))


def paused_turn_of(row: Any) -> PausedTurn:
    """A ``hearth_paused_turns`` row (``_TURN_COLUMNS``) as a ``PausedTurn``."""
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
