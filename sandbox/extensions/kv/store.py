"""The table behind the kv extension (the library's ``Store``: SQLite in the data dir,
or the kernel's PostgreSQL, ADR 0035), JSON values.

Limits are checked before anything is written, and every error names the
limit and the config key that sets it, so a model (or a developer) can act
on it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from core.extensions.sdk import PostgresTarget, Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
"""
POSTGRES_SCHEMA = (
    "CREATE TABLE kv (key text PRIMARY KEY, value text NOT NULL,"
    " updated_at double precision NOT NULL)",
)
_GLOB_SPECIALS = str.maketrans({"*": "[*]", "?": "[?]", "[": "[[]"})


class KvError(ValueError):
    """A key or value the store refuses; the message says why and what to change."""


class KvStore(Store):
    """Durable ``key -> JSON value`` map in ``<data_dir>/kv.sqlite3`` (or PostgreSQL)."""

    SCHEMA = SCHEMA
    POSTGRES_SCHEMA = POSTGRES_SCHEMA

    def __init__(
        self,
        path: Path,
        *,
        max_key_bytes: int,
        max_value_bytes: int,
        postgres: PostgresTarget | None = None,
    ) -> None:
        super().__init__(path, postgres=postgres)
        self.max_key_bytes = max_key_bytes
        self.max_value_bytes = max_value_bytes

    # ---------------------------------------------------------------- checks

    def check_key(self, key: str) -> str:
        if not isinstance(key, str) or not key:
            raise KvError("key must be a non-empty string")
        size = len(key.encode("utf-8"))
        if size > self.max_key_bytes:
            raise KvError(
                f"key too long: {size} bytes > limit {self.max_key_bytes} (config kv.max_key_bytes)"
            )
        return key

    def encode(self, value: Any) -> str:
        """JSON text of ``value``, or ``KvError`` if it is not JSON or too large."""
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise KvError(f"value is not JSON-serialisable: {exc}") from None
        size = len(text.encode("utf-8"))
        if size > self.max_value_bytes:
            raise KvError(
                f"value too large: {size} bytes > limit {self.max_value_bytes} "
                "(config kv.max_value_bytes)"
            )
        return text

    # ------------------------------------------------------------ operations

    async def get(self, key: str) -> tuple[bool, Any]:
        """``(found, value)``."""
        self.check_key(key)
        row = await self.fetch_one("SELECT value FROM kv WHERE key = ?", (key,))
        return (False, None) if row is None else (True, json.loads(row[0]))

    async def set(self, key: str, value: Any) -> None:
        self.check_key(key)
        text = self.encode(value)
        await self.execute(
            "INSERT INTO kv (key, value, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, "
            "updated_at = excluded.updated_at",
            (key, text, time.time()),
        )

    async def delete(self, key: str) -> bool:
        self.check_key(key)
        return await self.execute("DELETE FROM kv WHERE key = ?", (key,)) > 0

    async def keys(self, prefix: str = "", limit: int | None = None) -> list[str]:
        """Keys starting with ``prefix``, sorted (by bytes); at most ``limit`` when given."""
        sql = "SELECT key FROM kv WHERE key GLOB ? ORDER BY key"
        args: tuple[Any, ...] = (prefix.translate(_GLOB_SPECIALS) + "*",)
        if self.dialect == "postgres":
            sql = 'SELECT key FROM kv WHERE key LIKE ? ORDER BY key COLLATE "C"'
            args = (_like_prefix(prefix),)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        return [row[0] for row in await self.fetch_all(sql, args)]

    async def count(self, prefix: str = "") -> int:
        pattern = prefix.translate(_GLOB_SPECIALS) + "*"
        sql = "SELECT count(*) FROM kv WHERE key GLOB ?"
        if self.dialect == "postgres":
            sql, pattern = "SELECT count(*) FROM kv WHERE key LIKE ?", _like_prefix(prefix)
        row = await self.fetch_one(sql, (pattern,))
        return int(row[0]) if row else 0


def _like_prefix(prefix: str) -> str:
    """A ``LIKE`` pattern matching keys that start with ``prefix`` (backslash escapes)."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def parse_json_text(text: str) -> Any:
    """Parse a JSON document given by the model; ``KvError`` names what is wrong."""
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise KvError(
            f"value is not valid JSON ({exc.msg} at position {exc.pos}); "
            'give JSON text, e.g. "blue" (with quotes), 42, true, [1, 2] or {"a": 1}'
        ) from None
    return value


def _reject_constant(name: str) -> Any:
    raise KvError(f"value is not valid JSON: {name} is not allowed")
