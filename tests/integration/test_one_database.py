"""One way to a database (issue 42, ADR 0080): the kernel and its extensions reach
SQLite and PostgreSQL only through ``core/storage`` — the usage book, the manifest
schedules' fire state and the extension library's stores included; only the event
journals keep drivers of their own. What they keep survives a restart of the
kernel on both backends, a data directory written before the change still opens,
and a store's transaction holds only the statements of the task inside it."""

from __future__ import annotations

import ast
import asyncio
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agents.testing import ScriptedModel, assistant_message
from agents.usage import Usage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from conftest import PROJECT_ROOT, ext_code
from core.extensions.contract import StoreLocation, TurnContext
from core.extensions.sdk import DuplicateKeyError, Store
from core.kernel.commands.table import parse_command
from core.kernel.spending import SQLiteUsageBook
from core.scheduling import FireState
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.scheduler_helpers import replied

DRIVERS = {"sqlite3", "aiosqlite", "asyncpg", "psycopg", "psycopg2", "psycopg_pool"}
OPENERS = {
    "connect",
    "create_pool",
    "Connection",
    "AsyncConnection",
    "Pool",
    "ConnectionPool",
    "AsyncConnectionPool",
}
# the event journals keep their own drivers (ADR 0080): the SQLite journal's batched
# writes run as functions on aiosqlite's connection thread, in one hop per batch
JOURNALS = {"core/events/sqlite_journal.py"}


def connection_openers(path: Path) -> list[str]:
    """The calls in ``path`` that open a database connection or pool with a driver
    (``sqlite3.connect``, ``asyncpg.create_pool``, ``from aiosqlite import connect`` …)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()  # names bound to a driver module
    openers: set[str] = set()  # names bound to a driver's opener
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in DRIVERS:
                    modules.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in DRIVERS:
            for alias in node.names:
                if alias.name in OPENERS:
                    openers.add(alias.asname or alias.name)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        chain, target = [], node.func
        while isinstance(target, ast.Attribute):
            chain.append(target.attr)
            target = target.value
        if not isinstance(target, ast.Name):
            continue
        if (target.id in modules and OPENERS & set(chain)) or (not chain and target.id in openers):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}")
    return found


def test_only_the_storage_layer_and_the_journals_open_database_connections():
    files = [PROJECT_ROOT / "main.py"]
    for root in ("core", "sandbox/extensions"):
        files += sorted((PROJECT_ROOT / root).rglob("*.py"))
    opening = {}
    for path in files:
        found = connection_openers(path)
        if found:
            opening[str(path.relative_to(PROJECT_ROOT))] = found
    outside = {
        name: calls
        for name, calls in opening.items()
        if not name.startswith("core/storage/") and name not in JOURNALS
    }
    assert outside == {}, "open connections through core.storage (ADR 0080)"
    # the scan sees what it looks for: the storage layer's and the journal's own
    assert {"core/storage/sqlite.py", "core/storage/postgres.py", *JOURNALS} <= set(opening)


# ------------------------------------------------------------ a kernel restarted

USAGE = Usage(
    requests=1,
    input_tokens=1_000,
    input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
    output_tokens=100,
    output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    total_tokens=1_100,
)
TICKER = ext_code(
    """
    async def execute_task(self, task_name):
        return {"text": f"{task_name} ran"}
    """
)
NOTES = ext_code(
    header="""
    from core.extensions.sdk import Store

    class Notes(Store):
        SCHEMA = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"
        POSTGRES_SCHEMA = ("CREATE TABLE notes (id bigserial PRIMARY KEY, text text NOT NULL)",)
    """,
    body="""
    notes = None

    async def start(self):
        self.notes = Notes.at(self.ctx.storage, "notes.db")
        await self.notes.open()

    async def stop(self):
        await self.notes.close()

    def get_commands(self):
        from core.extensions.contract import Command

        async def note(args, turn):
            async with self.notes.transaction():  # two statements that land together
                first = await self.notes.execute_insert(
                    "INSERT INTO notes (text) VALUES (?)", (args,)
                )
                await self.notes.execute(
                    "UPDATE notes SET text = text || ? WHERE id = ?", ("!", first)
                )
            rows = await self.notes.fetch_all("SELECT text FROM notes ORDER BY id")
            return f"{self.notes.dialect}: " + ", ".join(text for (text,) in rows)

        return [Command("note", "Keep a note.", note)]
    """,
)
YEARLY = {"schedules": [{"name": "tick", "cron": "0 9 1 1 *", "task": "digest"}]}


def scripted(*answers: str) -> ScriptedModel:
    model = ScriptedModel([[assistant_message(answer)] for answer in answers])
    model.set_default_usage(USAGE)
    return model


async def test_usage_fire_state_and_history_survive_a_restart(
    make_ext, settings_file, storage_backend
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("ticker", TICKER, YEARLY)  # first sighting recorded; fires only on 1 January
    make_ext("notes", NOTES)
    path = settings_file(channels={"default": "capture"}, storage=storage_backend)
    backend = storage_backend["backend"]
    turn = TurnContext(channel_id="cli", user_id="u1")

    first = scripted("Nice to meet you, Bo.")
    async with running_kernel(path, model=first) as kernel:
        # the usage book is written on the ledger's own database (one connection)
        assert kernel.spending.book.db is kernel.conversations.storage.db
        await kernel.loader.instance("capture").say("I am Bo")
        await wait_for(lambda: replied(kernel) == ["Nice to meet you, Bo."])
        seen = await kernel.scheduler.state.last_due("ticker:tick")
        said = await kernel.commands.run(parse_command("/note milk"), turn)
        assert said == f"{backend}: milk!"
    assert seen is not None

    second = scripted("You are Bo.")
    async with running_kernel(path, model=second) as kernel:
        (entry,) = await kernel.spending.book.totals(0.0)
        assert (entry.usage.input_tokens, entry.usage.output_tokens) == (1_000, 100)
        assert await kernel.scheduler.state.last_due("ticker:tick") == seen  # not re-sighted
        said = await kernel.commands.run(parse_command("/note eggs"), turn)
        assert said == f"{backend}: milk!, eggs!"
        await kernel.loader.instance("capture").say("who am I?")
        await wait_for(lambda: replied(kernel) == ["You are Bo."])
    assert "I am Bo" in str(second.calls[0].input)  # the history came back
    second.assert_complete()
    data = path.parent / "data"
    assert (data / "schedules.db").is_file() == (backend == "sqlite")
    assert (data / "extensions" / "notes" / "notes.db").is_file() == (backend == "sqlite")


# ------------------------------------------------------------ an older data directory


def write_old_data_dir(data: Path, fired_at: float, used_at: float) -> None:
    """``schedules.db`` and the usage tables of ``sessions.db`` as the code before
    ADR 0080 created them: no ``hearth_schema`` rows for them, the fire state in
    ``manifest_fires``."""
    data.mkdir(parents=True)
    with sqlite3.connect(data / "schedules.db") as conn:
        conn.execute(
            "CREATE TABLE manifest_fires (schedule TEXT PRIMARY KEY, last_due REAL NOT NULL)"
        )
        conn.execute("INSERT INTO manifest_fires VALUES ('ticker:tick', ?)", (fired_at,))
    with sqlite3.connect(data / "sessions.db") as conn:
        conn.executescript(
            """
            CREATE TABLE hearth_usage (
                message_key TEXT NOT NULL, model TEXT NOT NULL, session_id TEXT NOT NULL,
                channel_id TEXT NOT NULL, person TEXT NOT NULL, created_at REAL NOT NULL,
                input_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,
                output_tokens INTEGER NOT NULL, requests INTEGER NOT NULL,
                PRIMARY KEY (message_key, model));
            CREATE TABLE hearth_budget_notices (period TEXT PRIMARY KEY, created_at REAL NOT NULL);
            CREATE TABLE hearth_tool_runs (
                turn_id TEXT NOT NULL, call_key TEXT NOT NULL, output TEXT NOT NULL,
                created_at REAL NOT NULL, PRIMARY KEY (turn_id, call_key));
            """
        )
        conn.execute(
            "INSERT INTO hearth_usage VALUES ('m1', 'gpt', 's1', 'cli', 'bo', ?, 7, 0, 3, 1)",
            (used_at,),
        )
        conn.execute("INSERT INTO hearth_budget_notices VALUES ('day:2026-01-01', ?)", (used_at,))
    conn.close()


async def test_an_older_data_directory_opens_with_its_rows(tmp_path):
    data = tmp_path / "data"
    fired_at, used_at = datetime(2026, 1, 1, 9, tzinfo=UTC).timestamp(), time.time() - 60
    write_old_data_dir(data, fired_at, used_at)
    for _ in range(2):  # the second open finds nothing left to migrate
        state = FireState(data / "schedules.db")
        await state.open()
        try:
            assert await state.last_due("ticker:tick") == datetime.fromtimestamp(fired_at, UTC)
            await state.record("ticker:other", datetime.fromtimestamp(fired_at + 60, UTC))
        finally:
            await state.close()
        book = SQLiteUsageBook(data / "sessions.db")
        await book.open()
        try:
            (entry,) = await book.entries(0.0)
            assert (entry.person, entry.model, entry.usage.input_tokens) == ("bo", "gpt", 7)
            assert await book.first_notice("day:2026-01-01") is False  # told before
        finally:
            await book.aclose()
    with sqlite3.connect(data / "schedules.db") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        versions = dict(conn.execute("SELECT component, version FROM hearth_schema"))
    conn.close()
    assert "manifest_fires" not in tables and "hearth_manifest_fires" in tables
    assert versions == {"schedules": 2}


# ------------------------------------------------------------ a store's transactions


class Notes(Store):
    SCHEMA = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"
    POSTGRES_SCHEMA = ("CREATE TABLE notes (id bigserial PRIMARY KEY, text text NOT NULL)",)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_transaction_holds_only_its_own_tasks_statements(backend, tmp_path, request):
    """Another task's write while a transaction is open is not part of it (a rollback
    keeps it); the task's own writes inside the block commit with it; a task started
    inside a block that writes after it ended never lands in a later transaction."""
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    where = StoreLocation(tmp_path, backend, dsn, "notes-ext")
    store = Notes.at(where, "notes.db")
    insert = "INSERT INTO notes (text) VALUES (?)"
    await store.open()
    inside, release, later, issuing = (asyncio.Event() for _ in range(4))

    async def rolled_back() -> None:
        async with store.transaction():
            await store.execute(insert, ("rolled back",))
            inside.set()
            await release.wait()
            raise RuntimeError("boom")

    async def beside() -> None:
        await inside.wait()
        writing = asyncio.create_task(store.execute(insert, ("beside",)))
        release.set()
        await writing

    async def write_later() -> None:
        await later.wait()
        issuing.set()
        await store.execute(insert, ("after",))

    try:
        results = await asyncio.gather(rolled_back(), beside(), return_exceptions=True)
        assert [type(r) for r in results] == [RuntimeError, type(None)]
        async with store.transaction() as tx:
            await tx.execute(insert, ("committed",))
            follower = asyncio.create_task(write_later())  # started inside the block
        with pytest.raises(RuntimeError, match="again"):
            async with store.transaction():
                await store.execute(insert, ("rolled back too",))
                later.set()
                await issuing.wait()  # the follower's write is under way now
                raise RuntimeError("again")
        await follower
        await store.close()
        await store.open()  # from the database, not a cache
        rows = await store.fetch_all("SELECT text FROM notes ORDER BY id")
        assert [text for (text,) in rows] == ["beside", "committed", "after"]
        (first_id,) = await store.fetch_one("SELECT min(id) FROM notes") or (None,)
        with pytest.raises(DuplicateKeyError):  # one error for a store written once
            await store.execute("INSERT INTO notes (id, text) VALUES (?, ?)", (first_id, "x"))
    finally:
        await store.close()


# ------------------------------------------------------------ the tool-run journal


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_recorded_tool_run_is_read_back_in_process_and_after_a_restart(
    backend, tmp_path, request
):
    from core.config import Settings, StorageSettings
    from core.kernel.spending import usage_book_for

    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    settings = Settings(storage=StorageSettings(backend=backend, postgres_dsn=dsn))
    book = usage_book_for(settings, tmp_path / "sessions.db")
    await book.open()
    try:
        assert await book.tool_output("turn-1", "clock\n{}\n1") is None  # a first run
        await book.record_tool("turn-1", "clock\n{}\n1", "12:00")
        assert await book.tool_output("turn-1", "clock\n{}\n1") == "12:00"  # a rerun here
        assert await book.tool_output("turn-1", "clock\n{}\n2") is None
    finally:
        await book.aclose()
    again = usage_book_for(settings, tmp_path / "sessions.db")
    await again.open()
    try:
        assert await again.tool_output("turn-1", "clock\n{}\n1") == "12:00"  # after a crash
        assert await again.tool_output("turn-2", "clock\n{}\n1") is None
    finally:
        await again.aclose()
