"""kv: a small durable key-value store (SQLite in its data dir, or the kernel's PostgreSQL).

Tools for the model: ``kv_get``, ``kv_set``, ``kv_delete``, ``kv_list``.

Python API for other extensions. Declare ``depends_on: [kv]`` in your
manifest, then::

    kv = context.get_extension("kv")          # None unless kv is in depends_on
    await kv.set("my_ext.last_run", {"at": "2024-05-01", "count": 3})
    value = await kv.get("my_ext.last_run", default=None)
    removed: bool = await kv.delete("my_ext.last_run")
    keys: list[str] = await kv.list(prefix="my_ext.")

Values are anything ``json.dumps`` accepts (no NaN/Infinity); ``set`` raises
``ValueError`` (``KvError``) for a non-JSON value, an empty or over-long key,
or a value over ``max_value_bytes``. The store is shared: prefix your keys
with your extension id. Call the API after ``initialize`` (kv starts first,
since you depend on it).

The model's tools keep each person's keys apart (SPEC §11): a member's
``kv_set("x", …)`` stores ``@NAME/x``, and their tools see only keys under
``@NAME/``; the owner's keys are stored as given (as before people existed),
and the owner, who administers the household, may read every key.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.extensions.contract import ExtensionContext, TurnContext
from core.extensions.sdk import BaseExtension

from .store import KvError, KvStore, parse_json_text

DB_FILE = "kv.sqlite3"


class KvConfig(BaseModel):
    """The ``config`` section (manifest defaults, ``settings.yaml`` overrides)."""

    model_config = ConfigDict(extra="forbid")

    max_key_bytes: int = Field(default=256, ge=1)
    max_value_bytes: int = Field(default=65_536, ge=16)
    max_list_keys: int = Field(default=200, ge=1)


class KvExtension(BaseExtension):
    """``Extension`` + ``ToolProvider``, and the Python API documented above."""

    def __init__(self) -> None:
        self._store: KvStore | None = None
        self._config = KvConfig()

    # -------------------------------------------------------------- lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        try:
            self._config = KvConfig.model_validate(context.config)
        except ValidationError as exc:
            raise ValueError(f"kv config (settings extensions.kv): {_describe(exc)}") from None
        self._store = KvStore.at(
            context.storage,
            DB_FILE,
            max_key_bytes=self._config.max_key_bytes,
            max_value_bytes=self._config.max_value_bytes,
        )
        await self._store.open()

    async def destroy(self) -> None:
        if self._store is not None:
            await self._store.close()

    def health_check(self) -> bool:
        return self._store is not None and self._store.is_open

    # ------------------------------------------------------------- Python API

    async def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        found, value = await self.store.get(key)
        return value if found else default

    async def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``, replacing any old value."""
        await self.store.set(key, value)

    async def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it existed."""
        return await self.store.delete(key)

    async def list(self, prefix: str = "") -> builtins.list[str]:
        """Every key starting with ``prefix``, sorted."""
        return await self.store.keys(prefix)

    @property
    def max_list_keys(self) -> int:
        return self._config.max_list_keys

    @property
    def store(self) -> KvStore:
        if self._store is None:
            raise RuntimeError("kv is not initialized yet")
        return self._store

    # ------------------------------------------------------------------ tools

    def get_tools(self) -> builtins.list[FunctionTool]:
        return [_kv_get(self), _kv_set(self), _kv_delete(self), _kv_list(self)]


def _space(ctx: RunContextWrapper[Any]) -> str:
    """The prefix of the turn's person's keys: ``@NAME/`` for a member, none for the owner."""
    turn = ctx.context
    person = turn.person_key if isinstance(turn, TurnContext) else None
    return "" if person is None else f"@{person}/"


def _kv_get(kv: KvExtension) -> FunctionTool:
    @function_tool
    async def kv_get(ctx: RunContextWrapper[Any], key: str) -> str:
        """Read the value stored under a key in the durable key-value store.

        Returns the value as JSON text, or says that the key is not set.

        Args:
            key: The exact key, as the person said it or kv_list shows it.
        """
        try:
            found, value = await kv.store.get(_space(ctx) + key)
        except KvError as exc:
            return f"error: {exc}"
        if not found:
            return f"not found: no value is stored under key {key!r}"
        return json.dumps(value, ensure_ascii=False)

    return kv_get


def _kv_set(kv: KvExtension) -> FunctionTool:
    @function_tool
    async def kv_set(ctx: RunContextWrapper[Any], key: str, value: str) -> str:
        """Store a value under a key in the durable key-value store (replaces any old value).

        Args:
            key: The key exactly as the person said it; a key you choose yourself may
                group with dots ("garden.last_watered").
            value: The value as JSON text: a string needs quotes ("blue"); numbers (42),
                booleans (true), lists ([1, 2]) and objects ({"a": 1}) as written.
        """
        try:
            await kv.store.set(_space(ctx) + key, parse_json_text(value))
        except KvError as exc:
            return f"error: {exc}"
        return f"stored {key!r}"

    return kv_set


def _kv_delete(kv: KvExtension) -> FunctionTool:
    @function_tool
    async def kv_delete(ctx: RunContextWrapper[Any], key: str) -> str:
        """Delete a key from the durable key-value store.

        Args:
            key: The exact key to delete.
        """
        try:
            deleted = await kv.store.delete(_space(ctx) + key)
        except KvError as exc:
            return f"error: {exc}"
        return f"deleted {key!r}" if deleted else f"not found: no value is stored under key {key!r}"

    return kv_delete


def _kv_list(kv: KvExtension) -> FunctionTool:
    @function_tool
    async def kv_list(ctx: RunContextWrapper[Any], prefix: str) -> str:
        """List the keys in the durable key-value store that start with a prefix, sorted.

        Args:
            prefix: Only keys starting with this text; "" lists every key.
        """
        limit, space = kv.max_list_keys, _space(ctx)
        keys = await kv.store.keys(space + prefix, limit=limit + 1)
        if not keys:
            return f"no keys start with {prefix!r}" if prefix else "the store is empty"
        shown = [key.removeprefix(space) for key in keys[:limit]]
        lines = "\n".join(shown)
        if len(keys) > limit:
            total = await kv.store.count(space + prefix)
            lines += f"\n… and {total - limit} more (give a longer prefix)"
        return lines

    return kv_list


def _describe(exc: ValidationError) -> str:
    """``field: message (got value)`` for each error, on one line."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']} (got {err.get('input')!r})"
        for err in exc.errors()
    )
