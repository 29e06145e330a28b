"""One storage layer and one migration runner for both databases (ADR 0051).

A store is written once with ``?`` placeholders and the SQL both databases
share; these tests run the same code on a SQLite file and on a fresh
PostgreSQL database (skipped with one line where no server runs): writes
land or roll back whole, migrations run once, in order, under a lock when
two "processes" open at once, and a database ahead of this code or a
broken migration is refused with the file and the version named.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from core.config import StorageSettings
from core.storage import (
    SCHEMA_TABLE,
    Database,
    DatabaseClosedError,
    Executor,
    PostgresDatabase,
    SQLiteDatabase,
    StorageError,
    apply_migrations,
    for_update,
    numbered,
    register_migrations,
    statements,
    upsert,
)

WIDGETS = "test_layer_widgets"


async def _count_column(tx: Executor) -> None:
    """A migration SQL alone cannot write on SQLite: add a column only where missing."""
    if tx.dialect == "sqlite":
        columns = {row[1] for row in await tx.fetch_all("PRAGMA table_info(widgets)")}
    else:
        rows = await tx.fetch_all(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'widgets'"
        )
        columns = {row[0] for row in rows}
    if "count" not in columns:
        await tx.execute("ALTER TABLE widgets ADD COLUMN count INTEGER NOT NULL DEFAULT 0")


register_migrations(
    WIDGETS,
    postgres=[
        "CREATE TABLE widgets (id bigserial PRIMARY KEY, name text UNIQUE NOT NULL,"
        " note text, flag boolean NOT NULL DEFAULT false);"
        " CREATE TABLE widget_runs (n integer NOT NULL); INSERT INTO widget_runs VALUES (1)",
        _count_column,
    ],
    sqlite=[
        "CREATE TABLE widgets (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE NOT NULL,"
        " note TEXT, flag BOOLEAN NOT NULL DEFAULT 0);"
        " CREATE TABLE widget_runs (n INTEGER NOT NULL); INSERT INTO widget_runs VALUES (1)",
        _count_column,
    ],
)

MakeDb = Callable[..., Database]


@pytest.fixture
async def make_db(tmp_path: Path, storage_backend: dict[str, str]) -> AsyncIterator[MakeDb]:
    """``make_db()``: one more "process"'s handle on the test's database (one SQLite
    file, or one PostgreSQL database), migrating ``WIDGETS`` unless told otherwise."""
    storage = StorageSettings.model_validate(storage_backend)
    made: list[Database] = []

    def make(components: tuple[str, ...] = (WIDGETS,)) -> Database:
        db: Database
        if storage.backend == "postgres":
            db = PostgresDatabase(storage, components, "the widget store is")
        else:
            db = SQLiteDatabase(tmp_path / "widgets.db", components)
        made.append(db)
        return db

    yield make
    for db in made:
        await db.close()


async def test_the_same_sql_writes_and_reads_on_both_databases(make_db):
    db = make_db()
    await db.open()
    put = upsert("widgets", ("name", "note", "count"), ("name",))
    assert await db.execute(put, "a", "first", 1) == 1
    assert await db.execute(put, "a", "second", 2) == 1  # the same row, updated
    assert await db.fetch_all("SELECT name, note, count FROM widgets") == [("a", "second", 2)]
    new_id = await db.fetch_value(
        "INSERT INTO widgets (name, flag) VALUES (?, ?) RETURNING id", "b", True
    )
    assert await db.fetch_one("SELECT name, flag FROM widgets WHERE id = ?", new_id) in (
        ("b", True),
        ("b", 1),
    )
    # a "?" inside a quoted string is text, not a placeholder
    assert await db.fetch_one("SELECT '?', ? || 'x'", "y") == ("?", "yx")
    skipped = await db.execute(
        upsert("widgets", ("name",), ("name",), update=()), "a"
    )  # ON CONFLICT DO NOTHING
    assert skipped == 0
    await db.execute_many("INSERT INTO widgets (name) VALUES (?)", [("c",), ("d",)])
    assert await db.execute("DELETE FROM widgets WHERE name IN (?, ?)", "c", "nope") == 1


async def test_a_transaction_lands_whole_or_not_at_all(make_db):
    db = make_db()
    await db.open()
    with pytest.raises(ZeroDivisionError):
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO widgets (name) VALUES (?)", "lost")
            1 / 0  # noqa: B018
    async with db.transaction() as tx:
        await tx.execute("INSERT INTO widgets (name) VALUES (?)", "kept")
        await tx.fetch_all("SELECT id FROM widgets" + for_update(tx.dialect))
    assert await db.fetch_all("SELECT name FROM widgets") == [("kept",)]


async def test_a_cancelled_transaction_is_rolled_back_and_the_store_still_works(make_db):
    db = make_db()
    await db.open()
    inside = asyncio.Event()

    async def writer() -> None:
        async with db.transaction() as tx:
            await tx.execute("INSERT INTO widgets (name) VALUES (?)", "half")
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(writer())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await db.fetch_all("SELECT name FROM widgets") == []
    assert await db.execute("INSERT INTO widgets (name) VALUES (?)", "after") == 1


async def test_migrations_run_once_in_order_when_two_processes_open_together(make_db):
    first, second = make_db(), make_db()
    await asyncio.gather(first.open(), second.open())
    assert await first.fetch_all("SELECT n FROM widget_runs") == [(1,)]  # not twice
    assert (
        await first.fetch_value(f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", WIDGETS)
        == 2
    )
    third = make_db()
    await third.open()  # nothing left to do
    assert await third.fetch_all("SELECT n FROM widget_runs") == [(1,)]


async def test_a_new_migration_is_applied_to_a_database_at_the_old_version(make_db):
    db = make_db(())
    await db.open()
    steps = ["CREATE TABLE gadgets (name TEXT NOT NULL)", "INSERT INTO gadgets VALUES ('old')"]
    assert await apply_migrations(db, registry={"test_gadgets": steps[:1]}) == {"test_gadgets": 1}
    await db.execute("INSERT INTO gadgets VALUES ('kept')")
    assert await apply_migrations(db, registry={"test_gadgets": steps}) == {"test_gadgets": 2}
    assert sorted(await db.fetch_all("SELECT name FROM gadgets")) == [("kept",), ("old",)]


async def test_a_database_ahead_of_this_code_is_refused(make_db, storage_backend):
    db = make_db(())
    await db.open()
    two = ["CREATE TABLE gizmos (n INTEGER)", "INSERT INTO gizmos VALUES (2)"]
    await apply_migrations(db, registry={"test_gizmos": two})
    with pytest.raises(StorageError) as refused:
        await apply_migrations(db, registry={"test_gizmos": two[:1]})
    message = str(refused.value)
    assert "'test_gizmos' is at version 2" in message and "only up to 1" in message
    if storage_backend["backend"] == "sqlite":
        assert "widgets.db" in message  # the file at fault


async def test_a_failing_migration_keeps_the_previous_version(make_db):
    db = make_db(())
    await db.open()
    good = "CREATE TABLE doohickeys (n INTEGER)"
    await apply_migrations(db, registry={"test_doohickeys": [good]})
    broken = [good, "INSERT INTO doohickeys VALUES (1); INSERT INTO nowhere VALUES (1)"]
    with pytest.raises(StorageError, match="migration test_doohickeys 2 failed"):
        await apply_migrations(db, registry={"test_doohickeys": broken})
    assert await db.fetch_all("SELECT n FROM doohickeys") == []  # its first statement too
    assert (
        await db.fetch_value(
            f"SELECT version FROM {SCHEMA_TABLE} WHERE component = ?", "test_doohickeys"
        )
        == 1
    )


async def test_a_store_used_before_open_names_itself(make_db):
    db = make_db()
    with pytest.raises(DatabaseClosedError, match=r"widget|widgets\.db"):
        await db.fetch_all("SELECT 1")


def test_unknown_components_and_migrations_registered_twice_differently_are_refused():
    with pytest.raises(ValueError, match="registered twice, differently"):
        register_migrations(WIDGETS, postgres=["CREATE TABLE other (n integer)"])
    with pytest.raises(ValueError, match="needs at least one migration"):
        register_migrations("test_empty")


def test_placeholders_and_scripts_are_split_outside_quotes():
    assert numbered("SELECT ?, '?', \"a?\", ? FROM t") == "SELECT $1, '?', \"a?\", $2 FROM t"
    script = "CREATE TABLE t (s TEXT DEFAULT 'a;b'); INSERT INTO t VALUES ('x;y');\n"
    assert statements(script) == [
        "CREATE TABLE t (s TEXT DEFAULT 'a;b');",
        "INSERT INTO t VALUES ('x;y');",
    ]
    with pytest.raises(ValueError, match="incomplete SQL statement"):
        statements("CREATE TABLE t (s TEXT DEFAULT 'unterminated;")
    assert upsert("t", ("k", "v"), ("k",)) == (
        "INSERT INTO t (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
    )


async def test_a_component_without_migrations_for_this_database_is_refused(tmp_path):
    register_migrations("test_pg_only", postgres=["CREATE TABLE only_pg (n integer)"])
    db = SQLiteDatabase(tmp_path / "pg_only.db", ["test_pg_only"])
    with pytest.raises(ValueError, match="no sqlite migrations registered for test_pg_only"):
        await db.open()
    assert not db.is_open  # what it opened is closed again


async def test_callers_opening_at_once_all_wait_for_the_migrations(make_db):
    db = make_db()
    await asyncio.gather(*(db.open() for _ in range(3)))
    assert db.is_open
    assert await db.fetch_all("SELECT n FROM widget_runs") == [(1,)]


async def test_stores_opening_one_new_file_together_all_open(tmp_path):
    """Several stores open ``sessions.db`` at the same moment at start: switching a
    new file to WAL answers ``database is locked`` at once to all but one of them
    (not through the busy timeout), so each must wait for the switch instead of
    failing the kernel's start. Forty rounds of four: the unguarded switch failed
    two runs in three here."""
    from core.storage.sqlite import SQLiteDatabase

    for round_ in range(40):
        path = tmp_path / f"sessions-{round_}.db"
        dbs = [SQLiteDatabase(path, wal=True) for _ in range(4)]
        await asyncio.gather(*(db.open() for db in dbs))
        assert await dbs[0].fetch_value("PRAGMA journal_mode") == "wal"
        await asyncio.gather(*(db.close() for db in dbs))
