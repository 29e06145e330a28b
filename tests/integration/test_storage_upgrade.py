"""A user's database written before the one migration runner (ADR 0051) keeps working.

The stores of ``sessions.db`` used to create their tables themselves (``CREATE
TABLE IF NOT EXISTS`` at every open, a column probed with ``PRAGMA
table_info``, ``user_version`` for the session ids); PostgreSQL already had
``hearth_schema``. Here a database is built exactly as that code left it, with
a user's rows in every table, and the new stores open it: the rows are all
there, read the same, and the schema is recorded as current — once, a second
start changes nothing.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import asyncpg
import pytest
from test_postprocess_runner import Sink

from core.config import StateSettings, StorageSettings
from core.extensions.contract import PostProcessResult, TurnContext
from core.kernel.consent.store import ApprovalStore
from core.kernel.conversations.ledger import StoredReply
from core.kernel.conversations.session_schema import (
    SESSION_MIGRATIONS,
    SESSIONS_COMPONENT,
    sessions_database,
)
from core.kernel.conversations.session_storage import SessionStorage
from core.kernel.postprocess import PostProcessing
from core.state import StateStore
from core.storage import SCHEMA_TABLE, numbered
from support.pg_helpers import run_sync
from support.postprocessors import wired_processors

ANA = TurnContext(channel_id="cli", user_id="ana", session_id="cli:ana", turn_id="1@1.0")
NOW = time.time()

# sessions.db's tables as the code before the runner created them (the ledger as it
# was before its followup column, ADR 0023, so the column migration runs too)
OLD_SQLITE_DDL = (
    "CREATE TABLE IF NOT EXISTS hearth_turns ("
    " message_key TEXT PRIMARY KEY, session_id TEXT NOT NULL, channel_id TEXT NOT NULL,"
    " user_id TEXT NOT NULL, reply TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hearth_conversations ("
    " key TEXT PRIMARY KEY, generation INTEGER NOT NULL, updated_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hearth_post_turns ("
    " message_key TEXT PRIMARY KEY, conversation TEXT NOT NULL, session_id TEXT,"
    " original TEXT NOT NULL, clean TEXT NOT NULL, specs TEXT NOT NULL, events TEXT NOT NULL,"
    " usage TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hearth_post_results ("
    " message_key TEXT NOT NULL, seq INTEGER NOT NULL, conversation TEXT NOT NULL,"
    " name TEXT NOT NULL, result TEXT NOT NULL, created_at REAL NOT NULL,"
    " PRIMARY KEY (message_key, seq))",
    "CREATE INDEX IF NOT EXISTS hearth_post_results_by_name"
    " ON hearth_post_results(conversation, name, created_at)",
    "CREATE TABLE IF NOT EXISTS hearth_post_activations ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, name TEXT NOT NULL,"
    " processor TEXT NOT NULL, default_param TEXT, created_at REAL NOT NULL,"
    " updated_at REAL NOT NULL, UNIQUE(conversation, name))",
    "CREATE TABLE IF NOT EXISTS hearth_post_defaults ("
    " conversation TEXT NOT NULL, processor TEXT NOT NULL, PRIMARY KEY (conversation, processor))",
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

RESULT = PostProcessResult(
    "decision", {"branch_key": "threshold_exceeded_critical"}, output_target="silent"
).to_dict()


def user_rows() -> list[tuple[str, tuple[object, ...]]]:
    """One user's rows in every table: (statement with ? marks, values)."""
    turn = ("m-1", 7, "cli:ana", "cli:ana", "cli", "ana", "ana")
    return [
        ("INSERT INTO hearth_conversations VALUES (?, ?, ?)", ("cli:ana", 0, NOW)),
        (
            "INSERT INTO hearth_turns(message_key, session_id, channel_id, user_id, reply,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?)",
            ("m-0", "cli:ana", "cli", "ana", "The disk is down to 2% free.", NOW),
        ),
        (
            "INSERT INTO hearth_post_turns VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("m-0", "cli:ana", "cli:ana", "Disk? #decision", "Disk?", "[]", "[]", "{}", NOW),
        ),
        (
            "INSERT INTO hearth_post_results(message_key, seq, conversation, name, result,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?)",
            ("m-0", 0, "cli:ana", "decision", json.dumps(RESULT), NOW),
        ),
        # ana renamed #json to #myjson and deactivated #decision
        (
            "INSERT INTO hearth_post_activations(conversation, name, processor, default_param,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            ("cli:ana", "myjson", "json", "full", NOW, NOW),
        ),
        *[
            ("INSERT INTO hearth_post_defaults VALUES (?, ?)", ("cli:ana", name))
            for name in ("json", "decision")  # extract and classify came in a later version
        ],
        (
            "INSERT INTO hearth_paused_turns(message_key, message_id, conversation, session_id,"
            " channel_id, user_id, owner_id, input_items, query, state, round, status,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*turn, "[]", "{}", json.dumps({"run_state": 3}), 1, "paused", NOW),
        ),
        (
            "INSERT INTO hearth_approvals(id, message_key, round, call_id, tool, arguments,"
            " status, always, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("q1", "m-1", 1, "c-1", "launch", '{"to": "moon"}', "pending", False, NOW, NOW + 600),
        ),
        ("INSERT INTO hearth_policy_grants VALUES (?, ?, ?, ?)", ("shell", "ana", "cli", NOW)),
    ]


def old_sqlite_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        for statement in OLD_SQLITE_DDL:
            conn.execute(statement)
        for sql, values in user_rows():
            conn.execute(sql, values)
        # escaped by the code before (ADR 0048): an id holding "%23" is not escaped again
        conn.execute(
            "INSERT INTO hearth_conversations VALUES ('http:a#b', 0, ?)",
            (NOW,),
        )
        conn.execute(
            "INSERT INTO hearth_turns(message_key, session_id, channel_id, user_id, reply,"
            " created_at) VALUES ('m-9', 'http:a%23b', 'http', 'a#b', 'hi', ?)",
            (NOW,),
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()


def old_postgres_database(dsn: str) -> None:
    """The database as the runner before ADR 0051 left it: ``hearth_schema`` as it
    created it, the ``sessions`` component at version 2, and the user's rows."""

    async def write() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(
                f"CREATE TABLE {SCHEMA_TABLE} (component text PRIMARY KEY,"
                " version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for script in SESSION_MIGRATIONS:
                await conn.execute(script)
            await conn.execute(
                f"INSERT INTO {SCHEMA_TABLE} (component, version) VALUES ($1, 2)",
                SESSIONS_COMPONENT,
            )
            for sql, values in user_rows():
                await conn.execute(numbered(sql), *values)
        finally:
            await conn.close()

    run_sync(write)


async def open_every_store(path: Path, storage: StorageSettings) -> dict[str, object]:
    """What a restarted kernel reads back through the new stores."""
    if storage.backend == "sqlite":
        sessions = SessionStorage.at(path)
        generations = await sessions.open()
        await sessions.aclose()
        assert generations == {"cli:ana": 0, "http:a#b": 0}
    post = PostProcessing.build(path, Sink(), wired_processors(), storage=storage)
    approvals = ApprovalStore(sessions_database(path, storage))
    await post.open()
    try:
        last = {c.name: c.handler for c in post.commands()}["last"]
        turns, grants = await approvals.open()
        return {
            "last": await last("decision", ANA),
            "activations": [
                (a.name, a.processor, a.default_param) for a in await post.activations.of("cli:ana")
            ],
            "paused": [(t.message_key, t.state, [q.tool for q in t.approvals]) for t in turns],
            "grants": [g.tool for g in grants],
            "version": await approvals.db.fetch_value(
                f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", SESSIONS_COMPONENT
            ),
        }
    finally:
        await post.aclose()
        await approvals.aclose()


@pytest.mark.parametrize("start", [1, 2])
async def test_a_sessions_db_written_before_the_runner_is_upgraded_and_kept(tmp_path, start):
    path = tmp_path / "sessions.db"
    old_sqlite_file(path)
    storage = StorageSettings()
    for _ in range(start):  # a second start changes nothing more
        seen = await open_every_store(path, storage)
    assert seen["version"] == 5  # 4: the SDK's history tables, where a file had none; 5: sent_at
    assert '"branch_key": "threshold_exceeded_critical"' in str(seen["last"])
    assert str(seen["last"]).startswith("Results for “Disk? #decision”")
    # the rename and the deactivation are kept; only built-ins never given arrive
    assert seen["activations"] == [
        ("myjson", "json", "full"),
        ("extract", "extract", None),
        ("classify", "classify", None),
    ]
    assert seen["paused"] == [("m-1", {"run_state": 3}, ["launch"])]
    assert seen["grants"] == ["shell"]
    sessions = SessionStorage.at(path)
    await sessions.open()
    try:  # the ledger row of before, with the column added since
        assert await (await sessions.session("cli:ana")).recorded("m-0") == StoredReply(
            "m-0", "cli", "ana", "The disk is down to 2% free.", None
        )
    finally:
        await sessions.aclose()
    with sqlite3.connect(path) as conn:
        ids = {row[0] for row in conn.execute("SELECT session_id FROM hearth_turns")}
    conn.close()
    assert ids == {"cli:ana", "http:a%23b"}  # escaped once, not twice


async def test_a_postgres_database_of_the_runner_before_is_taken_over(tmp_path, postgres_dsn):
    old_postgres_database(postgres_dsn)
    storage = StorageSettings(backend="postgres", postgres_dsn=postgres_dsn, pool_max_size=4)
    seen = await open_every_store(tmp_path / "unused.db", storage)
    assert seen["version"] == 4  # 3: replies' sent_at, 4: open paused turns by conversation
    assert '"branch_key": "threshold_exceeded_critical"' in str(seen["last"])
    assert seen["activations"] == [
        ("myjson", "json", "full"),
        ("extract", "extract", None),
        ("classify", "classify", None),
    ]
    assert seen["paused"] == [("m-1", {"run_state": 3}, ["launch"])]
    assert seen["grants"] == ["shell"]


# state.db as the code before the runner created it at every connect
OLD_STATE_DDL = (
    "CREATE TABLE IF NOT EXISTS hearth_extension_state ("
    " ext_id TEXT NOT NULL, session_id TEXT NOT NULL, key TEXT NOT NULL,"
    " value_json TEXT NOT NULL, size INTEGER NOT NULL,"
    " used_at REAL NOT NULL, expires_at REAL NOT NULL,"
    " PRIMARY KEY (ext_id, session_id, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS hearth_extension_state_lru"
    " ON hearth_extension_state (ext_id, used_at)",
    "CREATE INDEX IF NOT EXISTS hearth_extension_state_sizes"
    " ON hearth_extension_state (ext_id, session_id, size)",
    "CREATE INDEX IF NOT EXISTS hearth_extension_state_expiry"
    " ON hearth_extension_state (ext_id, expires_at)",
    "CREATE TABLE IF NOT EXISTS hearth_registered_extensions"
    " (ext_id TEXT PRIMARY KEY, registered_at REAL NOT NULL)",
)


async def test_a_state_db_written_before_the_runner_keeps_every_extensions_state(tmp_path):
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        for statement in OLD_STATE_DDL:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO hearth_extension_state VALUES ('kv', 'cli:ana', 'colour', '\"green\"',"
            " 14, ?, ?)",
            (NOW, NOW + 3600),
        )
        conn.execute("INSERT INTO hearth_registered_extensions VALUES ('kv', ?)", (NOW,))
    conn.close()
    for _ in range(2):  # a second start changes nothing more
        store = StateStore(path, StateSettings())
        await store.open()
        try:
            assert await store.get("kv", "cli:ana", "colour") == "green"
            reconciled = await store.reconcile_extensions(["kv", "notes"])
            assert reconciled.unregistered == {}  # kv was registered before
            await store.set("notes", None, "count", 1)
        finally:
            await store.aclose()
    assert reconciled.registered == ()  # notes was registered by the first start
    with sqlite3.connect(path) as conn:
        version = conn.execute(
            f"SELECT version FROM {SCHEMA_TABLE} WHERE component = 'state'"
        ).fetchone()
    conn.close()
    assert version == (2,)
