"""A user's conversations, written by the ledger before it was one store (ADR 0062), go on.

Before, the SQLite ledger was the SDK's ``SQLiteSession`` (its own
``agent_sessions``/``agent_messages`` tables, created by the SDK at connect)
and PostgreSQL had a twin (``hearth_session_items``). Here a database is left
exactly as that code left it — the ``sessions`` schema at its version then,
history written by the SDK's own ``SQLiteSession`` on SQLite — and the one
``LedgerSession`` opens it: the history reads the same, an answered message is
still answered once, and the next turn goes on the end of the same history.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from agents.memory import SQLiteSession

from core.config import StorageSettings
from core.kernel.conversations.ledger import StoredReply
from core.kernel.conversations.session_schema import (
    SESSION_MIGRATIONS,
    SESSIONS_COMPONENT,
    SQLITE_SESSION_MIGRATIONS,
)
from core.kernel.conversations.session_storage import SessionStorage
from core.storage import SCHEMA_TABLE, SQLiteDatabase, apply_migrations

SESSION = "cli:ana"
BEFORE = [
    {"role": "user", "content": "Is the disk full?"},
    {"role": "assistant", "content": "It is at 98%."},
]
ANSWER = StoredReply("m-1", "cli", "ana", "It is at 98%.", "Shall I clean /tmp?")
NEXT = [{"role": "user", "content": "Clean it."}, {"role": "assistant", "content": "Done."}]


async def sqlite_as_before(path: Path) -> None:
    """``sessions.db`` as the code before left it: the runner's three ``sessions``
    versions, the history added by the SDK's ``SQLiteSession``, the ledger row."""
    db = SQLiteDatabase(path)
    await db.open()
    try:
        await apply_migrations(db, registry={SESSIONS_COMPONENT: SQLITE_SESSION_MIGRATIONS[:3]})
        await db.write(
            "INSERT INTO hearth_turns (message_key, session_id, channel_id, user_id, reply,"
            " created_at, followup) VALUES (?, ?, ?, ?, ?, ?, ?)",
            ANSWER.message_key,
            SESSION,
            ANSWER.channel_id,
            ANSWER.user_id,
            ANSWER.text,
            time.time(),
            ANSWER.followup,
        )
    finally:
        await db.close()
    sdk = SQLiteSession(SESSION, path)
    try:
        await sdk.add_items(list(BEFORE))  # type: ignore[arg-type]
    finally:
        sdk.close()


async def postgres_as_before(dsn: str) -> None:
    """The PostgreSQL database as the twin store left it: ``sessions`` at version 2,
    the history in ``hearth_session_items``, the ledger row."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    try:
        await apply_migrations(pool, registry={SESSIONS_COMPONENT: SESSION_MIGRATIONS})
        await pool.executemany(
            "INSERT INTO hearth_session_items (session_id, message_data) VALUES ($1, $2)",
            [(SESSION, json.dumps(item)) for item in BEFORE],
        )
        await pool.execute(
            "INSERT INTO hearth_turns (message_key, session_id, channel_id, user_id, reply,"
            " created_at, followup) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            ANSWER.message_key,
            SESSION,
            ANSWER.channel_id,
            ANSWER.user_id,
            ANSWER.text,
            time.time(),
            ANSWER.followup,
        )
    finally:
        await pool.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def upgraded(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStorage]:
    """The session storage of the new code, opened on a database of the code before."""
    path = tmp_path / "sessions.db"
    settings = StorageSettings()
    if request.param == "sqlite":
        await sqlite_as_before(path)
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        await postgres_as_before(dsn)
        settings = StorageSettings(backend="postgres", postgres_dsn=dsn, pool_max_size=4)
    storage = SessionStorage.at(path, settings)
    await storage.open()
    yield storage
    await storage.aclose()


async def test_the_history_and_answers_of_before_are_read_and_continued(
    upgraded: SessionStorage,
) -> None:
    session = await upgraded.session(SESSION)

    assert await session.history(None) == BEFORE
    assert await session.recorded("m-1") == ANSWER
    assert await session.last_activity() is not None
    # the message answered before is answered once: redelivered, nothing is added
    again = StoredReply("m-1", "cli", "ana", "a second answer")
    assert await session.commit_turn(again, list(NEXT)) == ANSWER  # type: ignore[arg-type]
    assert await session.history(None) == BEFORE
    # the next message goes on the end of the same history
    reply = StoredReply("m-2", "cli", "ana", "Done.")
    assert await session.commit_turn(reply, list(NEXT)) == reply  # type: ignore[arg-type]
    assert await session.history(None) == BEFORE + NEXT
    reopened = await upgraded.session(SESSION)  # read back, not from memory
    assert await reopened.get_items() == BEFORE + NEXT
    assert await reopened.recorded("m-2") == reply
    # the last on SQLite: replies' sent_at; on PostgreSQL an index of open paused turns
    expected = 5 if upgraded.db.dialect == "sqlite" else 4
    version = await upgraded.db.fetch_value(
        f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", SESSIONS_COMPONENT
    )
    assert version == expected


async def test_a_second_start_changes_nothing(upgraded: SessionStorage, tmp_path: Path) -> None:
    session = await upgraded.session(SESSION)
    await session.commit_turn(StoredReply("m-2", "cli", "ana", "Done."), list(NEXT))  # type: ignore[arg-type]
    await upgraded.aclose()

    assert await upgraded.open() == {}
    assert await (await upgraded.session(SESSION)).get_items() == BEFORE + NEXT
