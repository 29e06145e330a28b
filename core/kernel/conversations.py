"""Which ``agents`` session a conversation currently uses.

A conversation is (channel, user). ``/new`` moves it to a fresh session id;
old histories stay in the sessions database. Sessions are cached so a turn
does not open a new SQLite connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import OrderedDict
from pathlib import Path

from agents.memory import SQLiteSession

_CACHE_SIZE = 64


class Conversations:
    """Session ids and ``SQLiteSession`` objects for every conversation."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._generations: dict[str, int] = {}
        self._sessions: OrderedDict[str, SQLiteSession] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def open(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._generations = await asyncio.to_thread(self._read_generations)

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    @staticmethod
    def key(channel_id: str, user_id: str) -> str:
        """``user_id`` is the address the channel gives a conversation: a person, or
        a chat where channels have them (Telegram: the chat id, ADR 0017)."""
        return f"{channel_id}:{user_id}"

    def lock(self, key: str) -> asyncio.Lock:
        """Turns of one conversation run one at a time, in arrival order."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def session_id(self, key: str) -> str:
        generation = self._generations.get(key, 0)
        return key if generation == 0 else f"{key}#{generation}"

    def session(self, key: str) -> SQLiteSession:
        session_id = self.session_id(key)
        session = self._sessions.get(session_id)
        if session is None:
            session = SQLiteSession(session_id, self.db_path)
            self._sessions[session_id] = session
            if len(self._sessions) > _CACHE_SIZE:
                _, evicted = self._sessions.popitem(last=False)
                evicted.close()
        else:
            self._sessions.move_to_end(session_id)
        return session

    async def start_new(self, key: str) -> str:
        """Begin a fresh session for this conversation; returns its id."""
        generation = self._generations.get(key, 0) + 1
        await asyncio.to_thread(self._write_generation, key, generation)
        self._generations[key] = generation
        return self.session_id(key)

    # ------------------------------------------------------------ storage

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.db_path)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS hearth_conversations ("
            " key TEXT PRIMARY KEY, generation INTEGER NOT NULL, updated_at REAL NOT NULL)"
        )
        return conn

    def _read_generations(self) -> dict[str, int]:
        with self._connect() as conn:
            rows = conn.execute("SELECT key, generation FROM hearth_conversations").fetchall()
        return {str(k): int(g) for k, g in rows}

    def _write_generation(self, key: str, generation: int) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO hearth_conversations(key, generation, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT(key) DO UPDATE SET generation = excluded.generation,"
                " updated_at = excluded.updated_at",
                (key, generation, time.time()),
            )
