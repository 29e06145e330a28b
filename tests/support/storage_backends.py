"""Read what a kernel test stored, whichever ``storage_backend`` (``pg_helpers``) ran it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg

from support.harness import session_history
from support.pg_helpers import run_sync


def stored_history(storage: dict[str, str], data_dir: Path, session_id: str) -> list[Any]:
    """A conversation's stored history items, oldest first: ``harness.session_history``
    (``sessions.db``) for SQLite, ``hearth_session_items`` for PostgreSQL (ADR 0035)."""
    if storage["backend"] == "sqlite":
        return session_history(data_dir, session_id)

    async def read() -> list[Any]:
        conn = await asyncpg.connect(storage["postgres_dsn"])
        try:
            rows = await conn.fetch(
                "SELECT message_data FROM hearth_session_items WHERE session_id = $1 ORDER BY id",
                session_id,
            )
        finally:
            await conn.close()
        return [json.loads(row[0]) for row in rows]

    return run_sync(read)
