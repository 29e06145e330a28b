"""Per-user activations: which ``#names`` a conversation may use, with default params.

An activation maps the name a user types to a post-processor and a default
param (seed 000 "Per-User Activation System"). One processor may be
activated several times: auto-naming gives ``json``, ``json2``, ``json3``…
and ``/ext rename`` picks any free name; ``/ext set`` changes a default
param. Activations belong to a person (key ``person:NAME``, SPEC §11), so one
made on Telegram applies on the CLI and in a new HTTP chat, and ``/new``
keeps them. Before issue 46 they belonged to a conversation key
(``channel:user``): the first time a person's activations are read, those of
the conversation they write from are copied to them (``legacy``), once.

The processors named by ``postprocess.activate_by_default`` (the bundled
``postprocessors`` extension's four, ADR 0063) are activated for every
conversation: the first time a conversation's activations are read, each
default it has never been given is activated once (and remembered in
``hearth_post_defaults``), so a default the user deactivated stays
deactivated and one added in a later version still arrives. Seeding is one
transaction that inserts with ``ON CONFLICT DO NOTHING``, so two processes
reading a new conversation at once seed it once. Rows live in the
``sessions`` component's database — ``sessions.db`` or PostgreSQL — through
``core.storage`` (ADR 0051). A conversation's list is cached after the first
read when this kernel is the only writer; with a database other processes
share it is read back each time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from core.runtime.errors import HearthError
from core.storage import Database, Executor

__all__ = ["Activation", "ActivationError", "ActivationStore"]


class ActivationError(HearthError, ValueError):
    """An activation change that cannot be made; the message is for the user."""


@dataclass(frozen=True, slots=True)
class Activation:
    """``#name`` runs ``processor`` with ``default_param`` unless the user types one."""

    name: str
    processor: str
    default_param: str | None = None


class ActivationStore:
    """Activations of every conversation; ``defaults``: the processors each one starts with."""

    def __init__(self, db: Database, defaults: Sequence[str]) -> None:
        self.db = db
        self._defaults = tuple(defaults)
        self._cache: dict[str, tuple[Activation, ...]] = {}
        self._lock = asyncio.Lock()  # one writer at a time keeps the cache true

    async def open(self) -> None:
        await self.db.open()

    async def aclose(self) -> None:
        await self.db.close()

    async def of(self, conversation: str, legacy: str | None = None) -> tuple[Activation, ...]:
        """The activations kept under ``conversation`` (a person's key) in the order
        they were made; ``legacy``: the key they were kept under before, copied the
        first time ``conversation`` is read."""
        cached = None if self.db.shared else self._cache.get(conversation)
        if cached is not None:
            return cached
        async with self._lock:
            cached = None if self.db.shared else self._cache.get(conversation)
            if cached is not None:  # filled while this task waited
                return cached
            found = await self._seed_and_read(conversation, self._defaults, legacy)
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
            await _insert(self.db, conversation, made)
            self._cache[conversation] = (*self._cache[conversation], made)
            return made

    async def rename(self, conversation: str, old: str, new: str) -> Activation:
        current = await self._find(conversation, old)
        async with self._lock:
            if any(a.name == new for a in self._cache[conversation]):
                raise ActivationError(f"#{new} is already taken")
            await self.db.execute(
                "UPDATE hearth_post_activations SET name = ?, updated_at = ?"
                " WHERE conversation = ? AND name = ?",
                new,
                time.time(),
                conversation,
                old,
            )
            renamed = Activation(new, current.processor, current.default_param)
            self._cache[conversation] = tuple(
                renamed if a.name == old else a for a in self._cache[conversation]
            )
            return renamed

    async def set_param(self, conversation: str, name: str, param: str | None) -> Activation:
        """``#name``'s default param is ``param`` from now on (``None``: none)."""
        current = await self._find(conversation, name)
        async with self._lock:
            await self.db.execute(
                "UPDATE hearth_post_activations SET default_param = ?, updated_at = ?"
                " WHERE conversation = ? AND name = ?",
                param,
                time.time(),
                conversation,
                name,
            )
            changed = Activation(name, current.processor, param)
            self._cache[conversation] = tuple(
                changed if a.name == name else a for a in self._cache[conversation]
            )
            return changed

    async def deactivate(self, conversation: str, name: str) -> Activation:
        current = await self._find(conversation, name)
        async with self._lock:
            await self.db.execute(
                "DELETE FROM hearth_post_activations WHERE conversation = ? AND name = ?",
                conversation,
                name,
            )
            self._cache[conversation] = tuple(
                a for a in self._cache[conversation] if a.name != name
            )
            return current

    async def _find(self, conversation: str, name: str) -> Activation:
        for activation in await self.of(conversation):
            if activation.name == name:
                return activation
        raise ActivationError(f"you have no #{name}; /ext lists your activations")

    async def _seed_and_read(
        self, conversation: str, defaults: Sequence[str], legacy: str | None = None
    ) -> tuple[Activation, ...]:
        """Copy ``legacy``'s activations when ``conversation`` has never been read;
        activate each default never given to ``conversation`` (under its own name,
        unless the user gave that name to another activation); read them all."""
        async with self.db.transaction() as tx:
            if legacy is not None and legacy != conversation:
                await _adopt(tx, conversation, legacy)
            for processor in defaults:
                given = await tx.execute(
                    "INSERT INTO hearth_post_defaults(conversation, processor) VALUES (?, ?)"
                    " ON CONFLICT DO NOTHING",
                    conversation,
                    processor,
                )
                if given:
                    await _insert(tx, conversation, Activation(processor, processor), True)
            rows = await tx.fetch_all(
                "SELECT name, processor, default_param FROM hearth_post_activations"
                " WHERE conversation = ? ORDER BY id",
                conversation,
            )
        return tuple(Activation(str(n), str(p), None if d is None else str(d)) for n, p, d in rows)


async def _insert(
    db: Executor, conversation: str, activation: Activation, if_free: bool = False
) -> None:
    """Insert one activation; with ``if_free`` a name already taken is left as it is."""
    now = time.time()
    await db.execute(
        "INSERT INTO hearth_post_activations"
        "(conversation, name, processor, default_param, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?)" + (" ON CONFLICT DO NOTHING" if if_free else ""),
        conversation,
        activation.name,
        activation.processor,
        activation.default_param,
        now,
        now,
    )


async def _adopt(tx: Executor, conversation: str, legacy: str) -> None:
    """``legacy``'s activations and given defaults become ``conversation``'s, when
    ``conversation`` has none of either yet (its first read)."""
    seen = await tx.fetch_all(
        "SELECT 1 FROM hearth_post_defaults WHERE conversation = ? UNION ALL"
        " SELECT 1 FROM hearth_post_activations WHERE conversation = ? LIMIT 1",
        conversation,
        conversation,
    )
    if seen:
        return
    await tx.execute(
        "INSERT INTO hearth_post_activations"
        "(conversation, name, processor, default_param, created_at, updated_at)"
        " SELECT ?, name, processor, default_param, created_at, updated_at"
        " FROM hearth_post_activations WHERE conversation = ? ORDER BY id"
        " ON CONFLICT DO NOTHING",
        conversation,
        legacy,
    )
    await tx.execute(
        "INSERT INTO hearth_post_defaults(conversation, processor)"
        " SELECT ?, processor FROM hearth_post_defaults WHERE conversation = ?"
        " ON CONFLICT DO NOTHING",
        conversation,
        legacy,
    )
