"""The conversation store never blocks the event loop and closes what it opens
(issue 12 item 5); nor does the kernel's restart request (its fsync)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.kernel.conversations.ledger import StoredReply
from core.kernel.conversations.sessions import Conversations
from core.runtime import restart_request_path
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

BLOCK_S = 1.0


@asynccontextmanager
async def loop_gaps() -> AsyncIterator[list[float]]:
    """Record how long the loop went between ticks of a 10 ms ticker."""
    gaps: list[float] = []

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    try:
        yield gaps
        seen = len(gaps)
        await wait_for(lambda: len(gaps) > seen + 1)  # a block just before counts too
    finally:
        task.cancel()


def hold_exclusive_lock(db: Path, seconds: float, locked: threading.Event) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        locked.set()
        time.sleep(seconds)
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def open_fds(path: Path) -> int:
    """File descriptors of this process on ``path`` (and its -wal/-shm files)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(path))
    return count


async def test_a_turn_written_while_the_database_is_busy_does_not_block_the_loop(tmp_path):
    db = tmp_path / "sessions.db"
    conversations = Conversations(db)
    await conversations.open()
    locked = threading.Event()
    holder = threading.Thread(target=hold_exclusive_lock, args=(db, BLOCK_S, locked))
    holder.start()
    try:
        assert locked.wait(10)
        async with loop_gaps() as gaps:
            start = time.monotonic()
            session = await conversations.session("chan:alice")
            reply = StoredReply("1@alice", "chan", "alice", "hi")
            await session.commit_turn(reply, [{"role": "user", "content": "hello"}])  # a write
            waited = time.monotonic() - start
        assert await session.history(None) == [{"role": "user", "content": "hello"}]
    finally:
        holder.join()
        await conversations.aclose()
    assert session.session_id == "chan:alice"
    assert waited >= BLOCK_S * 0.5  # it really had to wait for the lock ...
    assert max(gaps) < BLOCK_S / 2, max(gaps)  # ... and the loop kept ticking meanwhile


async def test_every_connection_is_closed(tmp_path):
    db = tmp_path / "sessions.db"
    conversations = Conversations(db)
    await conversations.open()
    for user in ("alice", "bob", "carol"):
        key = conversations.key("chan", user)
        session = await conversations.session(key)
        reply = StoredReply(f"1@{user}", "chan", user, "hi")
        await session.commit_turn(reply, [{"role": "user", "content": "hello"}])
        assert await session.history(None) == [{"role": "user", "content": "hello"}]
        await conversations.start_new(key)
    assert open_fds(db) > 0  # the cached sessions hold their connections
    await conversations.aclose()
    assert open_fds(db) == 0


async def test_a_session_in_use_is_not_closed_by_the_cache(tmp_path):
    """More conversations at once than the cache holds (the HTTP API makes that
    easy): a session a message is using stays open until it is done."""
    conversations = Conversations(tmp_path / "sessions.db", cache_size=2)
    await conversations.open()
    busy = conversations.key("chan", "busy")
    with conversations.held(busy):
        session = await conversations.session(busy)
        for user in ("a", "b", "c"):
            await conversations.session(conversations.key("chan", user))
        await session.commit_turn(StoredReply("1@busy", "chan", "busy", "hi"), [])
        assert await conversations.session(busy) is session
    for user in ("d", "e"):
        await conversations.session(conversations.key("chan", user))
    assert await conversations.session(busy) is not session  # idle now: it went
    await conversations.aclose()


async def test_restart_request_does_not_block_the_loop_on_a_slow_disk(
    make_ext, settings_file, tmp_path, monkeypatch
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        time.sleep(BLOCK_S)
        real_fsync(fd)

    async with running_kernel(settings_file()) as k:
        monkeypatch.setattr(os, "fsync", slow_fsync)
        async with loop_gaps() as gaps:
            k.request_restart("a new extension was installed")
            await wait_for(lambda: restart_request_path(k.data_dir).exists(), timeout=10)
        monkeypatch.setattr(os, "fsync", real_fsync)
    assert restart_request_path(k.data_dir).read_text().strip() == "a new extension was installed"
    assert max(gaps) < BLOCK_S / 2, max(gaps)


async def test_a_ledger_from_before_follow_ups_is_upgraded_and_kept(tmp_path: Path):
    db = tmp_path / "sessions.db"
    with sqlite3.connect(db) as conn:  # the ledger as ADR 0014 first wrote it
        conn.execute(
            "CREATE TABLE hearth_turns (message_key TEXT PRIMARY KEY, session_id TEXT NOT NULL,"
            " channel_id TEXT NOT NULL, user_id TEXT NOT NULL, reply TEXT NOT NULL,"
            " created_at REAL NOT NULL)"
        )
        conn.execute(
            "INSERT INTO hearth_turns VALUES ('1@1.0', 'cli:ana', 'cli', 'ana', 'Old.', ?)",
            (time.time(),),
        )
    conn.close()
    store = Conversations(db)
    await store.open()
    session = await store.session("cli:ana")
    assert await session.recorded("1@1.0") == StoredReply("1@1.0", "cli", "ana", "Old.", None)
    new = StoredReply("2@1.0", "cli", "ana", "New.", "#json\n{}")
    assert await session.commit_turn(new, []) == new
    assert await session.recorded("2@1.0") == new
    await store.aclose()
