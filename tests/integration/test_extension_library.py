"""The extension library (``core.extensions.sdk``): one copy of the helpers both
sides of the boundary need, a ``BaseExtension``, a SQLite store base, the fire
loop, and test helpers that run one bundled extension against a fake kernel."""

from __future__ import annotations

import ast
import asyncio
import logging
import sqlite3
import threading
from datetime import UTC, datetime

import pytest

from conftest import PROJECT_ROOT
from core.extensions.contract import Command
from core.extensions.loading.capabilities import detect_capabilities
from core.extensions.sdk import (
    BaseExtension,
    DueLoop,
    NotInitializedError,
    SQLiteStore,
    StoreNotOpenError,
    late_note,
)
from core.extensions.sdk.testing import FakeContext, call_tool, run_command, running
from support.harness import wait_for
from support.scheduler_helpers import FakeClock

SHARED = ("resolve_zone", "local_zone", "to_instant", "late_note", "next_interval", "utc_now")


def test_each_shared_helper_is_defined_once_in_kernel_and_extensions():
    places: dict[str, list[str]] = {name: [] for name in (*SHARED, "_sleep_s")}
    for root in ("core", "sandbox/extensions"):
        for path in sorted((PROJECT_ROOT / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in places:
                    places[node.name].append(str(path.relative_to(PROJECT_ROOT)))
    assert {n: p for n, p in places.items() if len(p) > 1} == {}
    assert all(p[0].startswith("core/extensions/sdk/") for n, p in places.items() if n in SHARED)


class Hello(BaseExtension):
    def get_commands(self) -> list[Command]:
        async def hello(args, turn):
            return f"hello {args} ({self.context.get_config('greeting')})"

        return [Command("hello", "Say hello.", hello)]


async def test_base_extension_needs_only_its_capabilities(tmp_path):
    ext = Hello()
    with pytest.raises(NotInitializedError, match="Hello: the context is used before"):
        _ = ext.context
    assert detect_capabilities(ext) == ["CommandProvider"]
    ctx = FakeContext(tmp_path, "hello", config_values={"greeting": "hi"})
    async with running(ext, ctx):
        assert ext.health_check() is True
        assert await run_command(ext, "hello", " there ") == "hello there (hi)"
        assert await ctx.list_commands() == [("hello", "Say hello.")]


class Notes(SQLiteStore):
    SCHEMA = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"


def sqlite_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sqlite:") and t.is_alive()]


async def test_sqlite_store_is_wal_transactional_and_closes(tmp_path):
    store = Notes(tmp_path / "deep" / "notes.db")
    before = set(sqlite_threads())
    await store.open()
    (worker,) = set(sqlite_threads()) - before
    await store.open()  # idempotent
    assert await store.fetch_one("PRAGMA journal_mode") == ("wal",)
    first = await store.execute_insert("INSERT INTO notes (text) VALUES (?)", ("a",))
    with pytest.raises(sqlite3.IntegrityError):
        async with store.transaction() as db:
            await db.execute("INSERT INTO notes (text) VALUES ('b')")
            await db.execute("INSERT INTO notes (text) VALUES (NULL)")
    assert await store.fetch_all("SELECT id, text FROM notes") == [(first, "a")]
    assert await store.execute("DELETE FROM notes WHERE text = ?", ("a",)) == 1
    await store.close()
    await store.close()
    await wait_for(lambda: not worker.is_alive(), 5)  # the connection's thread is gone
    with pytest.raises(StoreNotOpenError, match="Notes .*notes.db is not open"):
        await store.fetch_all("SELECT 1")


async def test_due_loop_backs_off_after_a_failing_pass_and_wakes_at_once(caplog):
    calls: list[int] = []

    async def fire_due() -> None:
        calls.append(len(calls))
        if len(calls) <= 2:
            raise OSError("database is locked")

    async def nothing_due() -> datetime | None:
        return None

    loop = DueLoop(fire_due, nothing_due, max_sleep_s=0.05)
    task = asyncio.create_task(loop.run())
    try:
        with caplog.at_level(logging.ERROR):
            await wait_for(lambda: len(calls) >= 3)
        assert "firing schedules failed (attempt 2)" in caplog.text
        loop.max_sleep_s = 300  # now only wake() can make it look again soon
        await asyncio.sleep(0.1)
        before = len(calls)
        loop.wake()
        await wait_for(lambda: len(calls) > before, 5)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_late_note_names_the_due_time_in_the_users_zone():
    due = datetime(2024, 5, 10, 7, 0, tzinfo=UTC)
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    assert late_note(due, due.replace(minute=1), berlin, 60) == ""
    assert late_note(due, due.replace(hour=8), berlin, 60) == " (late: due 09:00)"
    assert late_note(due, due.replace(day=11), berlin, 60) == " (late: due 2024-05-10 09:00)"


async def test_fake_kernel_runs_the_kv_extension(tmp_path):
    from sandbox.extensions.kv.main import KvExtension

    ctx = FakeContext(tmp_path, "kv", config_values={"max_value_bytes": 64})
    async with running(KvExtension(), ctx) as kv:
        assert await call_tool(kv, "kv_set", {"key": "colour", "value": '"blue"'}) == (
            "stored 'colour'"
        )
        assert await kv.get("colour") == "blue"
        too_big = await call_tool(kv, "kv_set", {"key": "x", "value": '"' + "y" * 80 + '"'})
        assert too_big.startswith("error: value too large")
    assert (tmp_path / "kv" / "kv.sqlite3").exists()


async def test_fake_kernel_runs_the_scheduler_and_its_fire_loop(tmp_path):
    from sandbox.extensions.scheduler.main import SchedulerExtension

    ext = SchedulerExtension()
    clock = FakeClock(datetime(2024, 5, 10, 8, 0, tzinfo=UTC))
    ext.clock = clock
    ctx = FakeContext(tmp_path, "scheduler", config_values={"timezone": "Europe/Berlin"})
    async with running(ext, ctx):
        reply = await run_command(ext, "remind", "10m tea")
        assert reply is not None and "tea" in reply
        clock.advance(minutes=11)
        ext.loop.wake()
        fired = await wait_for(lambda: [e for e in ctx.emitted if e.topic == "reminder.due"])
    assert fired[0].payload["text"] == "⏰ Reminder: tea"
    assert fired[0].idempotency_key.startswith("scheduler:1:")
