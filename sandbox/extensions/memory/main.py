"""memory: long-term facts the assistant consults on every turn.

Facts live in SQLite with an FTS5 index (``store.py``). ``recall`` and the
context provider rank by BM25 at a bounded cost (``ranking.py``; newer first
on equal scores) fused with cosine similarity of embeddings (``fusion.py``):
by default a multilingual model running locally, loaded once as a shared
service (``semantic.py``, ``embeddings.py``), vectors kept as int8 with the
rows (``vectors.py``) and backfilled in the background for older memories.
``embeddings.backend: none`` (or any failure of the backend) leaves BM25. Writes are
de-duplicated: a fact whose normalised text equals, or whose words almost all
match (token Jaccard ≥ ``dedupe_jaccard``), a stored one refreshes that fact
instead of adding one.

Past conversations (``conversation_search.py``, ``turn_store.py``): each
answered turn's message (seen by the context provider) and answer (seen by
``on_turn_end``) are stored for ``search_conversations`` and ``/search``.

Tools: ``remember``, ``recall``, ``forget``, ``list_memories``,
``search_conversations``; the commands ``/memories`` and ``/search``. Other
extensions that declare ``depends_on: [memory]`` may call ``await
memory.remember_fact(text, source)`` and ``await memory.recall(query, limit)``.

Each person of the household has their own memories (SPEC §11): the
owner's stay in ``memory.sqlite3`` (where they were before people existed),
each member's are in a file of their own (``memory-<digest>.sqlite3``,
opened on first use), so no query of one person can reach another's.
``TurnContext.person_key`` picks the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import replace
from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool

from core.extensions.contract import (
    Command,
    ExtensionContext,
    ShortCircuit,
    TurnContext,
    TurnOutcome,
)
from core.extensions.sdk import BaseExtension

from .config import MemoryConfig, load_config
from .conversation_search import ConversationSearch, search_command, search_tool, when_text
from .fusion import convex_fusion, full_match_score, reciprocal_rank_fusion, relative_fusion
from .semantic import SemanticRecall
from .sentences import MemoryActions, answer
from .store import Memory, MemoryStore
from .turn_store import TurnStore

DB_FILE = "memory.sqlite3"
TURNS_FILE = "conversations.sqlite3"  # on PostgreSQL: the extension's schema (ADR 0035)
HEADER = "[Relevant memories]"
FUSION_POOL = 50
RECALL_LIMIT = 5
MODEL_CACHE = "model-cache"  # the local model's ONNX file, built on first use
MEMORIES_SHOWN = 5


class MemoryExtension(BaseExtension):
    """``Extension`` + ``ToolProvider`` + ``ContextProvider`` + ``CommandProvider``
    (``/memories``) + ``ServiceProvider`` (the backfill) + ``StatusReporter``."""

    def __init__(self) -> None:
        self._config = MemoryConfig()
        self._store: MemoryStore | None = None
        self._semantic: SemanticRecall | None = None
        self._write_lock = asyncio.Lock()
        self._members: dict[str, tuple[MemoryStore, SemanticRecall]] = {}
        self._opening = asyncio.Lock()
        self._api_key: str | None = None
        self._turns: ConversationSearch | None = None

    # -------------------------------------------------------------- lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        self._config = load_config(context.config)
        self._store = MemoryStore(context.data_dir / DB_FILE)
        await self._store.open()
        emb = self._config.embeddings
        api_key = emb.api_key
        if emb.backend == "openai" and emb.api_key_secret:
            api_key = _declared_secret(context, emb.api_key_secret)
        self._api_key = api_key
        self._semantic = self._semantic_for(self._store)
        await self._semantic.load_index()
        turns = TurnStore.at(context.storage, TURNS_FILE)
        self._turns = ConversationSearch(
            turns, self._semantic, self._log(), self._config.conversation_days
        )
        await self._turns.open()

    def _semantic_for(self, store: MemoryStore) -> SemanticRecall:
        """Meaning search over one person's store (the embedding model is shared)."""
        return SemanticRecall(
            self._config.embeddings,
            self.context.services,
            store,
            self._log(),
            self._api_key,
            self.context.data_dir / MODEL_CACHE,
        )

    async def shelf(self, person: str | None) -> tuple[MemoryStore, SemanticRecall]:
        """The store and meaning index of ``person`` (``None``: the owner's)."""
        if person is None:
            return self.store, self.semantic
        found = self._members.get(person)
        if found is not None:
            return found
        async with self._opening:
            found = self._members.get(person)
            if found is None:
                digest = hashlib.sha256(person.encode()).hexdigest()[:16]
                store = MemoryStore(self.context.data_dir / f"memory-{digest}.sqlite3")
                await store.open()
                semantic = self._semantic_for(store)
                await semantic.load_index()
                found = self._members[person] = (store, semantic)
        return found

    async def run_background(self) -> None:
        """Embed the memories that have no vector yet (after an upgrade), then any
        stored while the backend was failing; embed new conversation turns and purge
        old ones; supervised by the loader."""
        await asyncio.gather(self.semantic.backfill(self._write_lock), self.turns.run())

    async def status_lines(self) -> list[str]:
        """What ``doctor`` and ``/status`` show: backend, model, embedded count."""
        return await self.semantic.status_lines()

    async def destroy(self) -> None:
        # the embedding backend is a shared service: the kernel closes it at teardown
        if self._store is not None:
            await self._store.close()
        if self._turns is not None:
            await self._turns.store.close()
        for store, _ in self._members.values():
            await store.close()
        self._members.clear()

    def health_check(self) -> bool:
        return self._store is not None and self._store.is_open

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            raise RuntimeError("memory is not initialized yet")
        return self._store

    @property
    def turns(self) -> ConversationSearch:
        """Search over past conversations (``search_conversations``, ``/search``)."""
        if self._turns is None:
            raise RuntimeError("memory is not initialized yet")
        return self._turns

    @property
    def semantic(self) -> SemanticRecall:
        if self._semantic is None:
            raise RuntimeError("memory is not initialized yet")
        return self._semantic

    # ----------------------------------------------------------- the core API

    async def remember_fact(
        self, text: str, source: str = "tool", person: str | None = None
    ) -> tuple[Memory, bool]:
        """Store ``text`` for ``person`` (``None``: the owner); returns ``(memory,
        created)`` — ``created`` is False for a duplicate."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("the fact is empty")
        if len(text) > self._config.max_fact_chars:
            raise ValueError(
                f"fact too long: {len(text)} characters > limit {self._config.max_fact_chars} "
                "(config memory.max_fact_chars); store shorter, separate facts"
            )
        store, semantic = await self.shelf(person)
        async with self._write_lock:
            duplicate = await store.find_duplicate(text, self._config.dedupe_jaccard)
            if duplicate is not None:
                await store.touch(duplicate.id)
                return duplicate, False
            blobs = await semantic.passage_blobs([text])
            blob = blobs[0] if blobs else None
            memory_id = await store.insert(text, source, blob, semantic.model)
            semantic.stored(memory_id, blob)
        memory = await store.get(memory_id)
        assert memory is not None
        return memory, True

    async def forget_fact(self, memory_id: int, person: str | None = None) -> Memory | None:
        store, semantic = await self.shelf(person)
        async with self._write_lock:
            memory = await store.delete(memory_id)
            semantic.index.remove(memory_id)
        return memory

    async def recall(
        self, query: str, limit: int = RECALL_LIMIT, person: str | None = None
    ) -> list[Memory]:
        """The ``limit`` memories most relevant to ``query``, best first.

        Words and meaning are searched at once (the query embeds and the
        vectors are scanned in a worker thread while SQLite ranks by BM25),
        then fused (``fusion.py``).
        """
        store, semantic = await self.shelf(person)
        if not semantic.enabled or len(semantic.index) == 0:  # no vector to find
            return await store.search(query, limit)
        (words, doc_freqs), found = await asyncio.gather(
            store.search_counting(query, FUSION_POOL), semantic.search(query, FUSION_POOL)
        )
        if found is None:
            return words[:limit]
        lexical = [(m.id, m.score) for m in words]
        if semantic.config.fusion == "rrf":
            fused = reciprocal_rank_fusion([[m.id for m in words], [i for i, _ in found.hits]])
        else:
            cosines = dict(found.hits) | semantic.index.similarities(
                [m.id for m in words], found.vector
            )
            if semantic.config.fusion == "convex":
                fused = convex_fusion(lexical, cosines, semantic.config.similarity_floor)
            else:
                full = full_match_score(doc_freqs, len(semantic.index))
                fused = relative_fusion(lexical, cosines, found.spread, full)
        best = sorted(fused, key=lambda i: -fused[i])[: limit * 2]
        known = {m.id: m for m in words}
        missing = [i for i in best if i not in known]
        known.update(await store.by_ids(missing))
        ranked = sorted(
            (replace(known[i], score=fused[i]) for i in best if i in known),
            key=lambda m: (-round(m.score, 9), -m.updated_at),
        )
        return ranked[:limit]

    def _log(self) -> logging.Logger:
        return self.context.logger

    # ------------------------------------------------------- ContextProvider

    @property
    def context_priority(self) -> int:
        return self._config.context_priority

    async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None:
        self.turns.heard(turn_context, prompt)  # stored with the answer at the turn's end
        memories = await self.recall(
            prompt, self._config.max_context_items, turn_context.person_key
        )
        return format_context(memories, self._config.max_context_chars)

    async def on_input_messages(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> ShortCircuit | None:
        """``InputMessagesHook``: "remember that …", "merk dir, dass …", "what do you
        remember about …", "forget that …" answered at once (``sentences.py``)."""
        if not self._config.local_first or not messages:
            return None
        text = messages[-1].get("content")
        if messages[-1].get("role") != "user" or not isinstance(text, str):
            return None
        person = turn.person_key
        reply = await answer(
            text,
            MemoryActions(
                remember=lambda fact: self.remember_fact(fact, "sentence", person),
                recall=lambda query: self.recall(query, RECALL_LIMIT, person),
                forget=lambda memory_id: self.forget_fact(memory_id, person),
            ),
        )
        return None if reply is None else ShortCircuit(reply)

    async def on_turn_end(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        """``TurnEndHook``: an answered turn's message and answer become searchable."""
        await self.turns.ended(turn, outcome)

    # ------------------------------------------------------------------ tools

    def get_tools(self) -> list[FunctionTool]:
        return [
            _remember(self),
            _recall(self),
            _forget(self),
            _list_memories(self),
            search_tool(self.turns),
        ]

    # --------------------------------------------------------------- commands

    def get_commands(self) -> list[Command]:
        async def memories(args: str, turn: TurnContext) -> str:
            store, _ = await self.shelf(turn.person_key)
            total = await store.count()
            newest = await store.newest(MEMORIES_SHOWN)
            head = f"{total} {'memory' if total == 1 else 'memories'} kept"
            return "\n".join([head, *(f"#{m.id}: {m.text}" for m in newest)])

        return [
            Command("memories", "how many memories are kept, and the newest", memories),
            search_command(self.turns),
        ]


def format_context(memories: list[Memory], max_chars: int) -> str | None:
    """``[Relevant memories]`` then ``- fact`` lines, never longer than ``max_chars``.

    A fact that does not fit is skipped (a shorter one after it may fit); the
    first fact is shortened with an ellipsis rather than dropped.
    """
    text = HEADER
    for memory in memories:
        line = f"\n- {memory.text}"
        room = max_chars - len(text)
        if len(line) > room:
            if text != HEADER or room < 8:
                continue
            line = line[: room - 1] + "…"
        text += line
    return None if text == HEADER else text


def _person_of(ctx: RunContextWrapper[Any]) -> str | None:
    """Whose memories a tool call reads and writes (no turn: the owner's)."""
    turn = ctx.context
    return turn.person_key if isinstance(turn, TurnContext) else None


def _source_of(ctx: RunContextWrapper[Any]) -> str:
    turn = ctx.context
    if isinstance(turn, TurnContext) and turn.channel_id:
        return f"{turn.channel_id}:{turn.user_id}" if turn.user_id else turn.channel_id
    return "tool"


def _declared_secret(context: ExtensionContext, name: str) -> str:
    try:
        value = context.get_secret(name)
    except Exception as exc:
        raise ValueError(
            f"config memory.embeddings.api_key_secret: {name!r} must also be listed under "
            f"`secrets:` in the memory manifest ({exc})"
        ) from None
    if not value:
        raise ValueError(
            f"config memory.embeddings.api_key_secret: secret {name!r} is not set "
            "(environment or .env)"
        )
    return value


def _describe(memory: Memory, *, score: bool) -> str:
    meta = f"source {memory.source}, created {when_text(memory.created_at)}"
    if memory.updated_at - memory.created_at >= 1:
        meta += f", updated {when_text(memory.updated_at)}"
    if score:
        meta = f"score {memory.score:.3f}, " + meta
    return f"#{memory.id} ({meta}): {memory.text}"


def _remember(ext: MemoryExtension) -> FunctionTool:
    @function_tool
    async def remember(ctx: RunContextWrapper[Any], text: str) -> str:
        """Store one durable fact in long-term memory (about the user, people, plans, preferences).

        Write it as a self-contained sentence that makes sense later on its own, e.g.
        "The user's sister Anna lives in Lisbon." Near-identical facts are not stored twice.

        Args:
            text: The fact, one self-contained sentence.
        """
        try:
            memory, created = await ext.remember_fact(text, _source_of(ctx), _person_of(ctx))
        except ValueError as exc:
            return f"error: {exc}"
        if created:
            return f"remembered #{memory.id}: {memory.text}"
        return f"already remembered as #{memory.id} (refreshed): {memory.text}"

    return remember


def _recall(ext: MemoryExtension) -> FunctionTool:
    @function_tool
    async def recall(ctx: RunContextWrapper[Any], query: str, limit: int = RECALL_LIMIT) -> str:
        """Search long-term memory; returns the best matches, most relevant first.

        Each line is "#id (score, source, created/updated time): fact"; use the id with forget.

        Args:
            query: What to look for, in plain words (e.g. "sister's city").
            limit: How many memories to return (1-20).
        """
        memories = await ext.recall(query, max(1, min(limit, 20)), _person_of(ctx))
        if not memories:
            return f"no memories match {query!r}"
        return "\n".join(_describe(m, score=True) for m in memories)

    return recall


def _forget(ext: MemoryExtension) -> FunctionTool:
    @function_tool
    async def forget(ctx: RunContextWrapper[Any], memory_id: int) -> str:
        """Delete one memory by its id (the number after # in recall or list_memories).

        Args:
            memory_id: The id of the memory to delete.
        """
        memory = await ext.forget_fact(memory_id, _person_of(ctx))
        if memory is None:
            return f"error: no memory with id {memory_id}"
        return f"forgot #{memory.id}: {memory.text}"

    return forget


def _list_memories(ext: MemoryExtension) -> FunctionTool:
    @function_tool
    async def list_memories(ctx: RunContextWrapper[Any], limit: int = 20, offset: int = 0) -> str:
        """List stored memories, most recently updated first.

        Args:
            limit: How many to show (1-100).
            offset: How many of the newest to skip (for paging).
        """
        store, _ = await ext.shelf(_person_of(ctx))
        total = await store.count()
        if total == 0:
            return "no memories stored yet"
        limit = max(1, min(limit, 100))
        memories = await store.newest(limit, max(0, offset))
        lines = [_describe(m, score=False) for m in memories]
        shown = f"{len(memories)} of {total} memories, newest first"
        return "\n".join([shown, *lines])

    return list_memories
