"""Issue 28 item 15: a conversation named ``dave#1`` never reads ``dave``'s history.

Session ids were ``<conversation>`` and, after ``/new``, ``<conversation>#<n>``,
so the conversation ``capture:dave#1`` and ``capture:dave``'s first renewed
session were one history. Ids now escape the conversation key (ADR 0048);
ids stored before are rewritten once at start, so no history is lost.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
from agents import SQLiteSession
from agents.testing import ScriptedModel, assistant_message

from core.kernel.conversations.session_ids import (
    conversation_of,
    session_id_of,
    upgraded_session_id,
)
from core.kernel.conversations.session_schema import SESSION_MIGRATIONS, SESSIONS_COMPONENT
from core.storage import apply_migrations
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.pg_helpers import run_sync
from support.storage_backends import stored_history


def test_ids_are_unambiguous_and_read_back():
    keys = ["capture:dave", "capture:dave#1", "http:100%", "http:a%23b", "http:#", "tg:-100"]
    ids = {session_id_of(key, generation) for key in keys for generation in range(3)}
    assert len(ids) == len(keys) * 3
    for key in keys:
        for generation in range(3):
            assert conversation_of(session_id_of(key, generation)) == key
    assert session_id_of("capture:dave", 1) == "capture:dave#1"  # unchanged where it was clear
    assert session_id_of("capture:dave#1", 0) == "capture:dave%231"


def test_old_ids_are_upgraded_by_what_the_conversations_reached():
    generations = {"capture:dave": 2}
    assert upgraded_session_id("capture:dave#1", generations) == "capture:dave#1"
    assert upgraded_session_id("capture:dave#2", generations) == "capture:dave#2"
    assert upgraded_session_id("capture:dave#3", generations) == "capture:dave%233"  # a key
    assert upgraded_session_id("capture:team#x", generations) == "capture:team%23x"
    assert upgraded_session_id("capture:100%", generations) == "capture:100%25"
    assert upgraded_session_id("capture:dave#01", generations) == "capture:dave%2301"


def replies(capture: Any) -> list[str]:
    return [text for kind, _, text in capture.sent or [] if kind == "reply"]


async def say(capture: Any, text: str, user: str) -> str:
    before = len(replies(capture))
    await capture.say(text, user)
    await wait_for(lambda: len(replies(capture)) > before)
    return replies(capture)[-1]


def user_texts(model: ScriptedModel) -> list[str]:
    items = model.calls[-1].input
    return [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]


async def test_dave_hash_1_never_reads_daves_history_after_new(
    make_ext, settings_file, storage_backend
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, storage=storage_backend)
    model = ScriptedModel([[assistant_message(f"ok {n}")] for n in range(4)])
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        await say(capture, "hello", "dave")
        await say(capture, "/new", "dave")
        await say(capture, "my bank PIN is 4321", "dave")  # dave's session #1
        await say(capture, "what did I tell you?", "dave#1")
        assert user_texts(model) == ["what did I tell you?"]
        await say(capture, "and now?", "dave")
        assert user_texts(model) == ["my bank PIN is 4321", "and now?"]
        dave = stored_history(storage_backend, kernel.data_dir, "capture:dave#1")
        other = stored_history(storage_backend, kernel.data_dir, "capture:dave%231")
    assert "4321" in json.dumps(dave) and "4321" not in json.dumps(other)
    assert "what did I tell you?" in json.dumps(other)
    model.assert_complete()


# ------------------------------------------------------------------ the upgrade

# What an older Hearth left: dave renewed once; "team#x" and "100%" never did.
OLD_HISTORIES = {
    "capture:dave": "dave before /new",
    "capture:dave#1": "dave after /new",
    "capture:dave#2": "dave#2's own",  # dave never reached 2: a conversation of its own
    "capture:team#x": "team's plan",
    "capture:100%": "percent's note",
}
OLD_GENERATIONS = {"capture:dave": 1}


def message(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


async def old_sqlite_store(db: Path) -> None:
    for session_id, text in OLD_HISTORIES.items():
        session = SQLiteSession(session_id, db)
        await session.add_items([message(text)])
        session.close()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE hearth_conversations ("
            " key TEXT PRIMARY KEY, generation INTEGER NOT NULL, updated_at REAL NOT NULL)"
        )
        conn.executemany(
            "INSERT INTO hearth_conversations VALUES (?, ?, 0)", OLD_GENERATIONS.items()
        )
    conn.close()


def old_postgres_store(dsn: str) -> None:
    async def write() -> None:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        try:
            old = {SESSIONS_COMPONENT: SESSION_MIGRATIONS[:1]}  # the schema before ADR 0048
            await apply_migrations(pool, [SESSIONS_COMPONENT], registry=old)
            await pool.executemany(
                "INSERT INTO hearth_session_items(session_id, message_data) VALUES ($1, $2)",
                [(sid, json.dumps(message(text))) for sid, text in OLD_HISTORIES.items()],
            )
            await pool.executemany(
                "INSERT INTO hearth_conversations VALUES ($1, $2, 0)", OLD_GENERATIONS.items()
            )
        finally:
            await pool.close()

    run_sync(write)


async def test_histories_stored_by_an_older_hearth_survive_the_upgrade(
    make_ext, settings_file, storage_backend, tmp_path: Path
):
    if storage_backend["backend"] == "sqlite":
        (tmp_path / "data").mkdir()
        await old_sqlite_store(tmp_path / "data" / "sessions.db")
    else:
        old_postgres_store(storage_backend["postgres_dsn"])
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, storage=storage_backend)
    expected = {
        "dave": "dave after /new",  # dave is at generation 1: his renewed session
        "dave#2": "dave#2's own",
        "team#x": "team's plan",
        "100%": "percent's note",
    }
    for start in range(2):  # a second start changes nothing more
        model = ScriptedModel([[assistant_message("ok")] for _ in expected])
        async with running_kernel(path, model=model) as kernel:
            capture = kernel.loader.instance("capture")
            for user, remembered in expected.items():
                await say(capture, f"start {start}", user)
                texts = user_texts(model)
                assert texts[0] == remembered and len(texts) == 2 + start, (user, texts)
        model.assert_complete()
