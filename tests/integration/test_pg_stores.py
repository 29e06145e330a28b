"""The durable stores on PostgreSQL where several kernel processes share them
(ADR 0035): what SQLite got from being one process's file must hold across
processes — a message answered once, ``/new`` seen everywhere, a question
decided once, built-ins seeded once — and an extension's ``Store`` behaves on
PostgreSQL as on SQLite. Each "process" here is its own store object (with
its own caches) whose statements run on connections of their own; every test
gets a fresh database (skipped with one line where no server runs)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from core.config import StorageSettings
from core.extensions.contract import StoreLocation, TurnContext
from core.extensions.sdk import PostgresTarget, Store
from core.kernel.commands.table import parse_command
from core.kernel.consent.policy import Grant
from core.kernel.consent.store import Approval, ApprovalStore, PausedTurn
from core.kernel.conversations.ledger import LedgerSession, StoredReply
from core.kernel.conversations.session_schema import sessions_database
from core.kernel.conversations.session_storage import SessionStorage
from core.kernel.conversations.sessions import Conversations
from core.kernel.postprocess.activations import ActivationStore
from core.scheduling.state import FireState
from support.bundled import copy_bundled
from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.scheduler_helpers import install_scheduler, replied

Item = dict[str, object]


@pytest.fixture
def storage(postgres_dsn: str) -> StorageSettings:
    return StorageSettings(backend="postgres", postgres_dsn=postgres_dsn, pool_max_size=4)


@pytest.fixture
async def processes(
    storage: StorageSettings, tmp_path: Path
) -> AsyncIterator[tuple[Conversations, Conversations]]:
    """Two kernels' conversation stores on one database."""
    first = Conversations(tmp_path / "a.db", storage=SessionStorage.at(tmp_path / "a.db", storage))
    second = Conversations(tmp_path / "b.db", storage=SessionStorage.at(tmp_path / "b.db", storage))
    await first.open()
    await second.open()
    yield first, second
    await first.aclose()
    await second.aclose()


def exchange(n: int) -> list[Item]:
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": f"answer {n}"},
    ]


async def test_a_message_committed_by_two_processes_at_once_is_stored_once(processes):
    first, second = processes
    a, b = await first.session("tg:alice"), await second.session("tg:alice")
    reply_a = StoredReply("m-1", "tg", "alice", "from a")
    reply_b = StoredReply("m-1", "tg", "alice", "from b")
    stored = await asyncio.gather(
        a.commit_turn(reply_a, exchange(1)),  # type: ignore[arg-type]
        b.commit_turn(reply_b, exchange(1)),  # type: ignore[arg-type]
    )
    assert stored[0] == stored[1] and stored[0].text in ("from a", "from b")
    assert await a.history(None) == exchange(1)  # the exchange once, not twice
    assert await b.recorded("m-1") == stored[0]
    assert await a.last_activity() is not None


async def test_new_in_one_process_moves_the_conversation_in_every_process(processes):
    first, second = processes
    old = await second.session("tg:alice")
    await old.commit_turn(StoredReply("m-1", "tg", "alice", "hi"), exchange(1))  # type: ignore[arg-type]
    assert await first.start_new("tg:alice") == "tg:alice#1"
    fresh = await second.session("tg:alice")
    assert fresh.session_id == "tg:alice#1" and await fresh.history(None) == []
    assert await (await second.session_by_id("tg:alice")).history(None) == exchange(1)


async def test_the_postgres_session_is_an_sdk_session_the_runner_can_use(storage):
    conversations = Conversations(
        Path("unused.db"), storage=SessionStorage.at(Path("unused.db"), storage)
    )
    try:
        await conversations.open()  # migrates
        session = await conversations.session_by_id("cli:bo")
        assert isinstance(session, LedgerSession)
        model = ScriptedModel([[assistant_message("Hello Bo.")], [assistant_message("Bo.")]])
        agent = Agent(name="t", model=model)
        await Runner.run(agent, "I am Bo", session=session)
        await Runner.run(agent, "who am I?", session=session)
        assert "I am Bo" in str(model.calls[1].input)  # the history came from PostgreSQL
        items = await session.get_items()
        assert len(items) == 4 and await session.get_items(2) == items[2:]
        assert (await session.pop_item()) is not None and len(await session.get_items()) == 3
        await session.clear_session()
        assert await session.get_items() == []
    finally:
        await conversations.aclose()


async def test_compaction_replaces_the_oldest_items_only_if_nothing_moved(processes):
    first, _ = processes
    session = await first.session("tg:alice")
    for n in range(3):
        reply = StoredReply(f"m-{n}", "tg", "alice", "ok")
        await session.commit_turn(reply, exchange(n))  # type: ignore[arg-type]
    rows = await session.stored_items()
    summary = {"role": "user", "content": "summary of 0"}
    assert not await session.replace_oldest(rows[1].row_id, rows[-2].row_id, summary)  # moved
    assert await session.replace_oldest(rows[1].row_id, rows[-1].row_id, summary)
    assert await session.history(None) == [summary, *exchange(1), *exchange(2)]
    assert (await session.stored_size()).items == 5


async def test_a_question_decided_from_two_processes_is_decided_once(storage):
    one, two = (ApprovalStore(sessions_database(Path("unused.db"), storage)) for _ in "12")
    await one.open()
    await two.open()
    try:
        turn = PausedTurn(
            "m-1",
            7,
            "tg:alice",
            "tg:alice",
            "tg",
            "alice",
            "alice",
            [{"role": "user", "content": "launch"}],
            {},
            {"run_state": {"step": 3}},
        )
        asked = [Approval("q1", "m-1", 1, "call-1", "launch", {"to": "moon"}, time.time() + 60)]
        saved = await one.save(turn, asked)
        decisions = await asyncio.gather(
            one.decide(saved.approvals[0].id, "approved", "alice"),
            two.decide(saved.approvals[0].id, "denied", "bob"),
        )
        assert sorted(decisions) == [False, True]
        [reopened], _ = await two.open()  # a restarted process reads the RunState back
        assert reopened.state == {"run_state": {"step": 3}}
        assert reopened.approvals[0].status in ("approved", "denied")
        await one.grant(Grant("launch", "alice", "tg", 1.0))
        assert await two.revoke("launch") and not await one.revoke("launch")
    finally:
        await one.aclose()
        await two.aclose()


async def test_built_ins_are_seeded_once_when_two_processes_read_a_new_conversation(storage):
    stores = [
        ActivationStore(sessions_database(Path("unused.db"), storage), ["json", "decision"])
        for _ in range(2)
    ]
    for store in stores:
        await store.open()
    try:
        seen = await asyncio.gather(*(store.of("tg:alice") for store in stores))
        assert [a.name for a in seen[0]] == ["json", "decision"] == [a.name for a in seen[1]]
        await stores[0].deactivate("tg:alice", "json")
        assert [a.name for a in await stores[1].of("tg:alice")] == ["decision"]  # no stale cache
    finally:
        for store in stores:
            await store.aclose()


async def test_manifest_fire_state_is_kept_in_postgres(storage, tmp_path):
    state = FireState(tmp_path / "schedules.db", storage=storage)
    await state.open()
    due = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    await state.record("ticker:tick", due)
    await state.close()
    again = FireState(tmp_path / "schedules.db", storage=storage)
    await again.open()
    try:
        assert await again.last_due("ticker:tick") == due
        assert await again.last_due("ticker:other") is None
    finally:
        await again.close()
    assert not (tmp_path / "schedules.db").exists()


class Notes(Store):
    SCHEMA = "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);"
    POSTGRES_SCHEMA = ("CREATE TABLE notes (id bigserial PRIMARY KEY, text text NOT NULL)",)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_an_extension_store_behaves_the_same_on_both_backends(backend, tmp_path, request):
    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    where = StoreLocation(tmp_path, backend, dsn, "notes-ext")
    store = Notes.at(where, "notes.db")
    await store.open()
    try:
        assert store.dialect == backend
        first = await store.execute_insert("INSERT INTO notes (text) VALUES (?)", ("it's ?",))
        assert await store.fetch_one("SELECT text FROM notes WHERE id = ?", (first,)) == ("it's ?",)
        with pytest.raises(RuntimeError):
            async with store.transaction():
                await store.execute("INSERT INTO notes (text) VALUES (?)", ("rolled back",))
                raise RuntimeError("boom")
        assert await store.execute("UPDATE notes SET text = 'x' WHERE text LIKE '%?%'") == 1
        assert await store.fetch_all("SELECT text FROM notes ORDER BY id") == [("x",)]
    finally:
        await store.close()
    if dsn is not None:  # in the extension's own schema, migrated once, recorded
        conn = await asyncpg.connect(dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM ext_notes_ext.notes") == 1
            version = await conn.fetchval(
                "SELECT version FROM hearth_schema WHERE component = 'ext:notes-ext:notes'"
            )
            assert version == 1
        finally:
            await conn.close()
    else:
        assert (tmp_path / "notes.db").is_file()


async def test_an_extension_store_on_postgres_is_reached_only_in_its_own_schema(
    postgres_dsn, tmp_path
):
    mine = Notes(tmp_path / "notes.db", postgres=PostgresTarget(postgres_dsn, "mine"))
    theirs = Notes(tmp_path / "notes.db", postgres=PostgresTarget(postgres_dsn, "theirs"))
    await mine.open()
    await theirs.open()
    try:
        await mine.execute("INSERT INTO notes (text) VALUES (?)", ("private",))
        assert await theirs.fetch_all("SELECT text FROM notes") == []
    finally:
        await mine.close()
        await theirs.close()


async def test_a_kernel_on_postgres_end_to_end(
    storage, ext_root, make_ext, settings_file, tmp_path
):
    """A turn through the fake model server, a reminder firing, kv set and get, and
    the history still there after a restart — with nothing in SQLite files."""
    copy_bundled(ext_root, "kv")
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    with FakeOpenAIServer() as srv:
        path = settings_file(
            channels={"default": "capture"},
            models=models_section(srv.base_url, max_retries=0),
            storage=storage.model_dump(),
        )
        srv.script("Nice to meet you, Bo.")
        async with running_kernel(path) as kernel:
            channel = kernel.loader.instance("capture")
            await channel.say("I am Bo")
            await wait_for(lambda: replied(kernel) == ["Nice to meet you, Bo."])
            await channel.say("/remind 1s stretch")
            await wait_for(lambda: "⏰ Reminder: stretch" in replied(kernel), timeout=10)
            kv = kernel.loader.instance("kv")
            await kv.set("trip", {"to": "Porto"})
        srv.script("You are Bo.")
        async with running_kernel(path) as kernel:
            assert await kernel.loader.instance("kv").get("trip") == {"to": "Porto"}
            await kernel.loader.instance("capture").say("who am I?")
            await wait_for(lambda: replied(kernel) == ["You are Bo."])
    asked = [m["content"] for m in srv.requests[-1]["messages"] if m["role"] == "user"]
    assert asked[-2:] == ["I am Bo", "who am I?"]  # the history came back from PostgreSQL
    files = {p.name for p in (tmp_path / "data").rglob("*") if p.is_file()}
    assert not files & {"sessions.db", "state.db", "schedules.db", "kv.sqlite3", "events.db"}


NOTE_TAKER = ext_code(
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
            await self.notes.execute("INSERT INTO notes (text) VALUES (?)", (args,))
            [(n,)] = await self.notes.fetch_all("SELECT count(*) FROM notes")
            return f"{self.notes.dialect}: {n} notes"

        return [Command("note", "Keep a note.", note)]
    """,
)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_an_isolated_extension_keeps_sqlite_in_its_data_dir(
    storage, mode, make_ext, settings_file, tmp_path
):
    make_ext("notes", NOTE_TAKER, {"isolation": mode})
    path = settings_file(storage=storage.model_dump(), isolation={"call_timeout_s": 10})
    async with running_kernel(path) as kernel:
        turn = TurnContext(channel_id="cli", user_id="u1")
        said = await kernel.commands.run(parse_command("/note milk"), turn)
    expected = "sqlite" if mode == "process" else "postgres"
    assert said == f"{expected}: 1 notes"
    assert (tmp_path / "data" / "extensions" / "notes" / "notes.db").is_file() == (
        mode == "process"
    )
