"""Run a store's tests on both backends: ``storage_for`` gives the ``storage``
settings of a param (``sqlite``, or ``postgres`` on a fresh database, skipped
with one line where no server is reachable)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from core.settings_sections import StorageSettings
from harness import session_history
from pg_helpers import run_sync

BACKENDS = ("sqlite", "postgres")


def storage_for(request: pytest.FixtureRequest, backend: str) -> StorageSettings:
    """``storage`` settings for ``backend``; ``postgres`` asks for the ``postgres_dsn``
    fixture (a fresh database, dropped after the test)."""
    if backend == "sqlite":
        return StorageSettings()
    dsn = request.getfixturevalue("postgres_dsn")
    return StorageSettings(backend="postgres", postgres_dsn=dsn, pool_min_size=1, pool_max_size=4)


def stored_history(storage: StorageSettings, data_dir: Path, session_id: str) -> list[Any]:
    """A conversation's stored history items, oldest first, from whichever backend
    ``storage`` names (``harness.session_history`` for SQLite)."""
    if storage.backend == "sqlite":
        return session_history(data_dir, session_id)

    async def read() -> list[Any]:
        conn = await asyncpg.connect(storage.postgres_dsn)
        try:
            rows = await conn.fetch(
                "SELECT message_data FROM hearth_session_items WHERE session_id = $1 ORDER BY id",
                session_id,
            )
        finally:
            await conn.close()
        return [json.loads(row[0]) for row in rows]

    return run_sync(read)
