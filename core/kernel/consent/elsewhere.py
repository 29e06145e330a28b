"""Questions to a person whose channel runs in another kernel process (ADR 0091).

On a channels/workers split (PostgreSQL, ADR 0036) a worker has no channel: a
question it asks — a workflow's ``ask`` step, the approval of a workflow's
side-effecting step, an extension's ``ui_request`` in a worker's tool call —
cannot be shown by ``UiRequests`` itself, and the answer reaches whichever
worker claims the person's next message, not necessarily the one waiting. So
the question is kept in the database (``hearth_questions``, the ``questions``
component) and shown as a notification (``system.user.notify``: the channels
process that runs the channel sends it, with ``/answer ID`` in its words, as
any notice). The answer — ``/answer ID …`` typed, or a channel's
``system.ui.answer`` — is taken by any worker: it is checked there as a local
answer would be and written to the row by one conditional update. The asking
process reads the row every ``POLL_S`` until it is answered or its time runs
out; the row is then deleted.

A row names the turn that asked (a workflow step's turn id is the same each
time the step is driven): a step driven again after its worker died finds its
open question, shows it again under the same id, and takes an answer given
meanwhile. A channel with buttons shows the text too (the question crosses as
a notice, not as a ``UserRequest``).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, replace
from typing import Literal, cast

from core.config import StorageSettings
from core.events.system_payloads import UserNotify
from core.events.topics import SystemTopics
from core.extensions.contract import RequestOption, UserRequest
from core.kernel.consent.wording import new_request_id
from core.kernel.hooks.frames import FrameSink
from core.storage import Database, PostgresDatabase, register_migrations

__all__ = ["POLL_S", "QUESTIONS_COMPONENT", "AskedElsewhere", "QuestionsElsewhere"]

Kind = Literal["confirm", "select", "input", "secret"]
QUESTIONS_COMPONENT = "questions"
POLL_S = 0.5  # how often the asking process reads its question's row
STALE_S = 86400.0  # rows of questions whose asker is gone are deleted this long after expiry
_DDL = """
CREATE TABLE hearth_questions (
    id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, kind TEXT NOT NULL, prompt TEXT NOT NULL,
    options TEXT NOT NULL, channel_id TEXT NOT NULL, user_id TEXT NOT NULL,
    owner TEXT NOT NULL, answer TEXT, asked_at double precision NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX hearth_questions_by_turn ON hearth_questions (turn_id);
"""
register_migrations(QUESTIONS_COMPONENT, postgres=[_DDL])
_COLUMNS = "id, kind, prompt, options, channel_id, user_id, owner, expires_at"


@dataclass(frozen=True, slots=True)
class AskedElsewhere:
    """An open question another process asked: the request, where it was asked."""

    request: UserRequest
    channel_id: str
    user_id: str


class QuestionsElsewhere:
    """The ``hearth_questions`` table and the notices that show its questions."""

    def __init__(self, db: Database, bus: FrameSink) -> None:
        self.db = db
        self._bus = bus

    @classmethod
    def on(cls, storage: StorageSettings, bus: FrameSink) -> QuestionsElsewhere:
        return cls(PostgresDatabase(storage, [QUESTIONS_COMPONENT], "the questions are"), bus)

    async def _ready(self) -> Database:
        if not self.db.is_open:
            await self.db.open()
        return self.db

    async def aclose(self) -> None:
        if self.db.is_open:
            await self.db.close()

    async def keep(
        self, request: UserRequest, channel_id: str, user_id: str, turn_id: str
    ) -> UserRequest:
        """``request`` kept — or the open question ``turn_id`` asked already with the
        same words (a workflow step driven again after its worker died: the person
        may have answered meanwhile); its id may change (another process holds it)."""
        db = await self._ready()
        now = time.time()
        found = await db.fetch_value(
            "SELECT id FROM hearth_questions WHERE turn_id = ? AND kind = ? AND prompt = ?"
            " AND expires_at > ? ORDER BY asked_at LIMIT 1",
            turn_id,
            request.kind,
            request.prompt,
            now,
        )
        if found is not None:
            return replace(request, id=str(found))
        options = json.dumps([o.value for o in request.options])
        while True:
            added = await db.execute(
                "INSERT INTO hearth_questions (id, turn_id, kind, prompt, options, channel_id,"
                " user_id, owner, answer, asked_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?) ON CONFLICT (id) DO NOTHING",
                request.id,
                turn_id,
                request.kind,
                request.prompt,
                options,
                channel_id,
                user_id,
                request.owner_id or user_id,
                now,
                now + (request.timeout_s or 0.0),
            )
            if added:
                return request
            request = replace(request, id=new_request_id())

    async def ask(
        self, request: UserRequest, channel_id: str, user_id: str, text: str
    ) -> str | None:
        """Show ``text`` (the kept question) on the person's channel and wait for the
        answer (``None``: none in time); the row is gone after."""
        db = await self._ready()
        now = time.time()
        try:
            notice = UserNotify(text=text, channel_id=channel_id, user_id=user_id)
            await self._bus.publish(
                SystemTopics.USER_NOTIFY,
                "kernel",
                notice.to_payload(),
                idempotency_key=f"question:{request.id}:{now}",
            )
            return await self._answer(request.id, now + (request.timeout_s or 0.0))
        finally:
            await db.execute(
                "DELETE FROM hearth_questions WHERE id = ? OR expires_at < ?",
                request.id,
                now - STALE_S,
            )

    async def _answer(self, request_id: str, deadline: float) -> str | None:
        db = await self._ready()
        while True:
            answer = await db.fetch_value(
                "SELECT answer FROM hearth_questions WHERE id = ?", request_id
            )
            if answer is not None:
                return str(answer)
            if time.time() >= deadline:
                return None
            await asyncio.sleep(min(POLL_S, max(deadline - time.time(), 0.0)))

    async def asked(self, request_id: str) -> AskedElsewhere | None:
        """The open question ``request_id`` (unanswered, in time), if one was asked."""
        db = await self._ready()
        row = await db.fetch_one(
            f"SELECT {_COLUMNS} FROM hearth_questions WHERE id = ? AND answer IS NULL"
            " AND expires_at > ?",
            request_id.strip().lower(),
            time.time(),
        )
        if row is None:
            return None
        options = tuple(RequestOption(str(v), str(v)) for v in json.loads(row[3]))
        left = max(float(row[7]) - time.time(), 0.0)
        kind = cast(Kind, str(row[1]))
        request = UserRequest(str(row[0]), kind, str(row[2]), options, str(row[6]), left)
        return AskedElsewhere(request, str(row[4]), str(row[5]))

    async def settle(self, request_id: str, value: str) -> bool:
        """The answer, once: ``False`` when another came first (or time ran out)."""
        db = await self._ready()
        changed = await db.execute(
            "UPDATE hearth_questions SET answer = ? WHERE id = ? AND answer IS NULL"
            " AND expires_at > ?",
            value,
            request_id,
            time.time(),
        )
        return changed > 0
