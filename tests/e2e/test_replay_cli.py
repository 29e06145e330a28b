"""``main.py replay`` as a user runs it (SPEC §10): ``--list``, replaying a
conversation (exit 0 identical, 1 diverged), ``--export`` and ``--trace``, and a
conversation whose frames were purged (``events.retention_days``) refused with
a message instead of a partial replay."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from core.events import SQLiteJournal
from support.fake_openai import FakeOpenAIServer
from support.harness import CONVERSING
from support.replay_kit import SESSION, guard, model_settings, record_conversation, write_extensions


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


async def replay_cli(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(PROJECT_ROOT / "main.py"), "replay", "--settings", str(settings)]
    return await asyncio.to_thread(
        subprocess.run, [*command, *args], capture_output=True, text=True, timeout=180
    )


async def test_list_replay_export_trace_and_divergence(make_ext, settings_file, server, tmp_path):
    write_extensions(make_ext)
    path = settings_file(models=model_settings(server), policy={"profile": "safe"})
    await record_conversation(server, path)

    listed = await replay_cli(path, "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split("\t")[:2] == [SESSION, "2 turns"]

    same = await replay_cli(path, SESSION)
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith(f"identical: {SESSION}, 2 turns")

    trace = tmp_path / "conversation.jsonl"
    exported = await replay_cli(path, "--export", SESSION, str(trace))
    assert exported.returncode == 0, exported.stderr
    from_file = await replay_cli(path, "--trace", str(trace), "--json")
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["status"] == "identical"

    make_ext("guard", guard("venus"), CONVERSING)
    changed = await replay_cli(path, SESSION, "--json")
    assert changed.returncode == 1, changed.stderr
    report = json.loads(changed.stdout)
    assert report["status"] == "diverged"
    assert report["divergence"]["turn"] == 2
    assert report["divergence"]["got"]["topic"] == "hook.tool_call"
    words = await replay_cli(path, "--trace", str(trace))
    assert words.returncode == 1
    assert "diverged: capture:u1, turn 2, frame" in words.stdout
    assert '+   "target": "venus"' in words.stdout


async def test_purged_frames_are_reported_not_replayed(make_ext, settings_file, server):
    write_extensions(make_ext)
    path = settings_file(models=model_settings(server), policy={"profile": "safe"})
    settings, _ = await record_conversation(server, path)
    month = 30 * 86400.0
    with sqlite3.connect(settings.data_dir / "sessions.db") as conn:  # a month has passed
        conn.execute("UPDATE hearth_turns SET created_at = created_at - ?", (month,))
    conn.close()
    journal = SQLiteJournal(settings.data_dir / "events.db")
    assert await journal.purge(time.time() + 1) > 0  # what the bus does after retention_days

    result = await replay_cli(path, SESSION)

    assert result.returncode == 2
    assert "purged" in result.stderr and "events.retention_days" in result.stderr
    assert "cannot be replayed" in result.stderr


async def test_a_replay_on_postgres_settings_says_why_and_writes_nothing(
    make_ext, settings_file, server, postgres_dsn
):
    """Replay reads the SQLite journal: on PostgreSQL settings it says so in one line
    (not "no event journal here") and leaves the live database as it was."""
    import asyncpg

    write_extensions(make_ext)
    storage = {"backend": "postgres", "postgres_dsn": postgres_dsn}
    path = settings_file(models=model_settings(server), policy={"profile": "safe"}, storage=storage)
    await record_conversation(server, path)

    async def counts() -> tuple[int, int]:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            events = await conn.fetchval("SELECT count(*) FROM journal_events")
            turns = await conn.fetchval("SELECT count(*) FROM hearth_turns")
        finally:
            await conn.close()
        return int(events), int(turns)

    before = await counts()
    refused = await replay_cli(path, SESSION)
    assert refused.returncode == 2
    assert "storage.backend: postgres" in refused.stderr and "--trace" in refused.stderr
    assert await counts() == before
