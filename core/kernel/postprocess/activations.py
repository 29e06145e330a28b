"""Per-user activations: which ``#names`` a conversation may use, with default params.

An activation maps the name a user types to a post-processor and a default
param (seed 000 "Per-User Activation System"). One processor may be
activated several times: auto-naming gives ``json``, ``json2``, ``json3``…
and ``/ext rename`` picks any free name. Activations belong to a
conversation key (``channel:user``), so ``/new`` keeps them.

The built-ins are activated for every conversation by default: the first
time a conversation's activations are read, each built-in it has never been
given is activated once (and remembered in ``hearth_post_defaults``), so a
built-in the user deactivated stays deactivated and one added in a later
version still arrives. Rows live in ``sessions.db`` (every query in a worker
thread) or in PostgreSQL (``PostgresActivationRows``, ADR 0035), behind
``ActivationRows``. A conversation's list is cached after the first read
when this kernel is the only writer; with a store other processes share it
is read back each time.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.runtime.errors import HearthError

__all__ = [
    "ACTIVATIONS_DDL",
    "Activation",
    "ActivationError",
    "ActivationRows",
    "ActivationStore",
    "SQLiteActivationRows",
]

ACTIVATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS hearth_post_activations ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL, name TEXT NOT NULL,"
    " processor TEXT NOT NULL, default_param TEXT, created_at REAL NOT NULL,"
    " updated_at REAL NOT NULL, UNIQUE(conversation, name))",
    "CREATE TABLE IF NOT EXISTS hearth_post_defaults ("
    " conversation TEXT NOT NULL, processor TEXT NOT NULL, PRIMARY KEY (conversation, processor))",
)


class ActivationError(HearthError, ValueError):
    """An activation change that cannot be made; the message is for the user."""


@dataclass(frozen=True, slots=True)
class Activation:
    """``#name`` runs ``processor`` with ``default_param`` unless the user types one."""

    name: str
    processor: str
    default_param: str | None = None


class ActivationRows(Protocol):
    """Where activations are stored."""

    shared: bool  # other kernel processes write the rows too: no cache

    async def open(self) -> None: ...

    async def seed_and_read(
        self, conversation: str, defaults: list[str]
    ) -> tuple[Activation, ...]: ...

    async def insert(self, conversation: str, activation: Activation) -> None: ...

    async def rename(self, conversation: str, old: str, new: str) -> None: ...

    async def delete(self, conversation: str, name: str) -> None: ...

    async def aclose(self) -> None: ...


class ActivationStore:
    """Activations of every conversation, in ``sessions.db`` unless ``rows`` says."""

    def __init__(
        self,
        db_path: Path,
        defaults: Callable[[], Sequence[str]],
        rows: ActivationRows | None = None,
    ) -> None:
        self.db_path = db_path
        self.rows = rows or SQLiteActivationRows(db_path)
        self._defaults = defaults
        self._cache: dict[str, tuple[Activation, ...]] = {}
        self._lock = asyncio.Lock()  # one writer at a time keeps the cache true

    async def open(self) -> None:
        await self.rows.open()

    async def aclose(self) -> None:
        await self.rows.aclose()

    async def of(self, conversation: str) -> tuple[Activation, ...]:
        """The conversation's activations in the order they were made."""
        cached = None if self.rows.shared else self._cache.get(conversation)
        if cached is not None:
            return cached
        async with self._lock:
            cached = None if self.rows.shared else self._cache.get(conversation)
            if cached is not None:  # filled while this task waited
                return cached
            defaults = list(self._defaults())
            found = await self.rows.seed_and_read(conversation, defaults)
            self._cache[conversation] = found
            return found

    async def activate(
        self, conversation: str, processor: str, default_param: str | None = None
    ) -> Activation:
        """A new activation of ``processor`` under the first free auto-name."""
        await self.of(conversation)
        async with self._lock:
            taken = {a.name for a in self._cache[conversation]}
            name = next(
                candidate
                for n in range(1, len(taken) + 2)
                if (candidate := processor if n == 1 else f"{processor}{n}") not in taken
            )
            made = Activation(name, processor, default_param)
            await self.rows.insert(conversation, made)
            self._cache[conversation] = (*self._cache[conversation], made)
            return made

    async def rename(self, conversation: str, old: str, new: str) -> Activation:
        current = await self._find(conversation, old)
        async with self._lock:
            if any(a.name == new for a in self._cache[conversation]):
                raise ActivationError(f"#{new} is already taken")
            await self.rows.rename(conversation, old, new)
            renamed = Activation(new, current.processor, current.default_param)
            self._cache[conversation] = tuple(
                renamed if a.name == old else a for a in self._cache[conversation]
            )
            return renamed

    async def deactivate(self, conversation: str, name: str) -> Activation:
        current = await self._find(conversation, name)
        async with self._lock:
            await self.rows.delete(conversation, name)
            self._cache[conversation] = tuple(
                a for a in self._cache[conversation] if a.name != name
            )
            return current

    async def _find(self, conversation: str, name: str) -> Activation:
        for activation in await self.of(conversation):
            if activation.name == name:
                return activation
        raise ActivationError(f"you have no #{name}; /ext lists your activations")


class SQLiteActivationRows:
    """The rows in ``sessions.db``: one connection per call, in a worker thread."""

    shared = False

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path

    async def open(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self._create)

    async def seed_and_read(self, conversation: str, defaults: list[str]) -> tuple[Activation, ...]:
        return await asyncio.to_thread(self._seed_and_read, conversation, defaults)

    async def insert(self, conversation: str, activation: Activation) -> None:
        await asyncio.to_thread(self._insert, conversation, activation)

    async def rename(self, conversation: str, old: str, new: str) -> None:
        await asyncio.to_thread(self._update_name, conversation, old, new)

    async def delete(self, conversation: str, name: str) -> None:
        await asyncio.to_thread(self._delete, conversation, name)

    async def aclose(self) -> None:
        """Nothing held: each call opens and closes its connection."""

    def _connect(self) -> closing[sqlite3.Connection]:
        return closing(sqlite3.connect(self.db_path, timeout=30))

    def _create(self) -> None:
        with self._connect() as conn:
            for statement in ACTIVATIONS_DDL:
                conn.execute(statement)
            conn.commit()

    def _seed_and_read(self, conversation: str, defaults: list[str]) -> tuple[Activation, ...]:
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            given = {
                row[0]
                for row in conn.execute(
                    "SELECT processor FROM hearth_post_defaults WHERE conversation = ?",
                    (conversation,),
                )
            }
            taken = {a.name for a in _read(conn, conversation)}
            for processor in defaults:
                if processor in given:
                    continue
                if processor not in taken:
                    _insert_row(conn, conversation, Activation(processor, processor))
                conn.execute(
                    "INSERT INTO hearth_post_defaults(conversation, processor) VALUES (?, ?)",
                    (conversation, processor),
                )
            conn.commit()
            return _read(conn, conversation)

    def _insert(self, conversation: str, activation: Activation) -> None:
        with self._connect() as conn:
            _insert_row(conn, conversation, activation)
            conn.commit()

    def _update_name(self, conversation: str, old: str, new: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "UPDATE hearth_post_activations SET name = ?, updated_at = ?"
                " WHERE conversation = ? AND name = ?",
                (new, time.time(), conversation, old),
            )
            conn.commit()

    def _delete(self, conversation: str, name: str) -> None:
        with self._connect() as conn:
            conn.execute(
                "DELETE FROM hearth_post_activations WHERE conversation = ? AND name = ?",
                (conversation, name),
            )
            conn.commit()


def _read(conn: sqlite3.Connection, conversation: str) -> tuple[Activation, ...]:
    rows = conn.execute(
        "SELECT name, processor, default_param FROM hearth_post_activations"
        " WHERE conversation = ? ORDER BY id",
        (conversation,),
    ).fetchall()
    return tuple(Activation(str(n), str(p), None if d is None else str(d)) for n, p, d in rows)


def _insert_row(conn: sqlite3.Connection, conversation: str, activation: Activation) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO hearth_post_activations"
        "(conversation, name, processor, default_param, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (conversation, activation.name, activation.processor, activation.default_param, now, now),
    )
