"""Shared helpers for the event bus tests: waiting on conditions, recording handlers,
and ``make_journal``, the fixture that runs a test on both journals."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import pytest

from core.events import Event, Journal, SQLiteJournal
from support.pg_helpers import fresh_database, run_sync

T = TypeVar("T")


async def wait_for(condition: Callable[[], bool], within: float = 5.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or condition}")
        await asyncio.sleep(0.005)


async def eventually(fetch: Callable[[], Awaitable[T]], within: float = 5.0) -> T:
    """Await ``fetch()`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = await fetch()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {fetch}")
        await asyncio.sleep(0.01)


class Recorder:
    """A handler that records every event it is given (and when)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.times: dict[int, float] = {}

    async def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.times.setdefault(event.id, time.perf_counter())

    @property
    def ids(self) -> list[int]:
        return [e.id for e in self.events]


@dataclass
class JournalFactory:
    """New journal objects on one store, as separate processes would open it:
    a SQLite file or a fresh PostgreSQL database (``backend``, ``location``)."""

    backend: str  # "sqlite" | "postgres"
    location: str  # the SQLite file or the PostgreSQL DSN

    def __call__(self, **options: Any) -> Journal:
        if self.backend == "sqlite":
            return SQLiteJournal(self.location, **options)
        from core.events.pg_journal import PostgresJournal

        return PostgresJournal(self.location, **options)

    def stored_event(self, event_id: int) -> tuple[Any, ...] | None:
        """(topic, source, payload, correlation_id) read over a connection of its own."""
        if self.backend == "sqlite":
            with sqlite3.connect(self.location) as db:
                row = db.execute(
                    "SELECT topic, source, payload, correlation_id FROM events WHERE id = ?",
                    (event_id,),
                ).fetchone()
            return None if row is None else tuple(row)
        row = self._pg_fetch(
            "SELECT topic, source, payload, correlation_id FROM journal_events WHERE id = $1",
            event_id,
        )
        return None if not row else tuple(row[0])

    def age_events(self, seconds: float, keep: int) -> None:
        """Make every event but ``keep`` look ``seconds`` older (retention tests)."""
        if self.backend == "sqlite":
            with sqlite3.connect(self.location) as db:
                db.execute(
                    "UPDATE events SET created_at = created_at - ? WHERE id != ?", (seconds, keep)
                )
            return
        self._pg_fetch(
            "UPDATE journal_events SET created_at = created_at - $1 WHERE id <> $2", seconds, keep
        )

    def _pg_fetch(self, sql: str, *args: Any) -> list[Any]:
        async def fetch() -> list[Any]:
            conn = await asyncpg.connect(self.location)
            try:
                return list(await conn.fetch(sql, *args))
            finally:
                await conn.close()

        return run_sync(fetch)


@pytest.fixture(params=["sqlite", "postgres"])
def make_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalFactory]:
    """Each bus test runs on both journals; the PostgreSQL run gets a fresh database
    (skipped with one line when no server is reachable, see ``pg_helpers``)."""
    if request.param == "sqlite":
        yield JournalFactory("sqlite", str(tmp_path / "e.db"))
        return
    dsn, drop = fresh_database()
    try:
        yield JournalFactory("postgres", dsn)
    finally:
        drop()
