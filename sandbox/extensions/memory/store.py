"""SQLite store of memories: a table plus an external-content FTS5 index.

Each row may carry its vector (``embedding``, an int8 blob from ``vectors``)
and the model that made it (``embedding_model``); rows without one, or made
by another model, are what the background backfill embeds.

One connection (the library's ``SQLiteStore``), WAL. A search is two statements:
the document frequency of each query term, then one ranking query whose
BM25 work is bounded by ``ranking.SCORE_BUDGET`` candidate rows; only the
best few are joined back to the table for the recency tie-break.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.extensions.sdk import SQLiteStore

from .ranking import SCORE_BUDGET, plan_search, scoring_query
from .text import jaccard, normalise, query_terms

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id         INTEGER PRIMARY KEY,
    text       TEXT NOT NULL,
    norm       TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    embedding  BLOB,
    embedding_model TEXT
);
CREATE INDEX IF NOT EXISTS memories_norm ON memories (norm);
CREATE INDEX IF NOT EXISTS memories_updated ON memories (updated_at);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    text, content = 'memories', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
END;
"""
COLUMNS = "m.id, m.text, m.source, m.created_at, m.updated_at"
DEDUPE_CANDIDATES = 10
MIN_POOL = 20


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored fact. ``score``: higher is more relevant (0 when not ranked)."""

    id: int
    text: str
    source: str
    created_at: float
    updated_at: float
    score: float = 0.0


class MemoryStore(SQLiteStore):
    """Memories in ``<data_dir>/memory.sqlite3``."""

    SCHEMA = SCHEMA

    async def open(self) -> None:
        """Open, and add ``embedding_model`` to a store written before it existed."""
        await super().open()
        columns = {row[1] for row in await self.fetch_all("PRAGMA table_info(memories)")}
        if "embedding_model" not in columns:
            await self.execute("ALTER TABLE memories ADD COLUMN embedding_model TEXT")

    # ---------------------------------------------------------------- writes

    async def insert(
        self, text: str, source: str, embedding: bytes | None = None, model: str | None = None
    ) -> int:
        now = time.time()
        return await self.execute_insert(
            "INSERT INTO memories (text, norm, source, created_at, updated_at, embedding, "
            "embedding_model) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (text, normalise(text), source, now, now, embedding, model if embedding else None),
        )

    async def set_embeddings(self, rows: Sequence[tuple[int, bytes]], model: str) -> list[int]:
        """Store vectors made by ``model``; returns the ids that still exist."""
        async with self.transaction() as db:
            await db.execute_many(
                "UPDATE memories SET embedding = ?, embedding_model = ? WHERE id = ?",
                [(blob, model, memory_id) for memory_id, blob in rows],
            )
        return list(await self.by_ids([memory_id for memory_id, _ in rows]))

    async def insert_many(self, facts: Iterable[tuple[str, str, float]]) -> None:
        """Bulk load ``(text, source, timestamp)`` in one transaction (imports, benchmarks)."""
        rows = [(text, normalise(text), source, ts, ts) for text, source, ts in facts]
        async with self.transaction() as db:
            await db.execute_many(
                "INSERT INTO memories (text, norm, source, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    async def touch(self, memory_id: int) -> None:
        await self.execute(
            "UPDATE memories SET updated_at = ? WHERE id = ?", (time.time(), memory_id)
        )

    async def delete(self, memory_id: int) -> Memory | None:
        memory = await self.get(memory_id)
        if memory is not None:
            await self.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return memory

    # ----------------------------------------------------------------- reads

    async def get(self, memory_id: int) -> Memory | None:
        row = await self.fetch_one(
            f"SELECT {COLUMNS} FROM memories AS m WHERE m.id = ?", (memory_id,)
        )
        return Memory(*row) if row else None

    async def count(self) -> int:
        rows = await self.fetch_all("SELECT count(*) FROM memories")
        return int(rows[0][0])

    async def newest(self, limit: int, offset: int = 0) -> list[Memory]:
        rows = await self.fetch_all(
            f"SELECT {COLUMNS} FROM memories AS m ORDER BY m.updated_at DESC, m.id DESC "
            "LIMIT ? OFFSET ?",
            (limit, offset),
        )
        return [Memory(*row) for row in rows]

    async def search(self, query: str, limit: int) -> list[Memory]:
        """Facts best matching ``query`` by BM25 (see ``ranking``), best first.

        Equal scores: most recently updated first. ``score`` is ``-bm25``.
        """
        return (await self.search_counting(query, limit))[0]

    async def search_counting(self, query: str, limit: int) -> tuple[list[Memory], dict[str, int]]:
        """``search``, and how many facts hold each of the query's terms (the
        ``relative`` fusion weighs a fact's words by them)."""
        doc_freqs = await self._doc_freqs(query_terms(query))
        return await self._ranked(doc_freqs, limit), doc_freqs

    async def _ranked(self, doc_freqs: dict[str, int], limit: int) -> list[Memory]:
        plan = plan_search(doc_freqs)
        if plan is None:
            return []
        floor = await self._recent_floor(plan.anchors[0]) if plan.recent_only else 0
        scored, args = scoring_query(plan, floor)
        rows = await self.fetch_all(
            f"SELECT {COLUMNS}, -f.s FROM ({scored} ORDER BY s LIMIT ?) AS f "
            "JOIN memories AS m ON m.id = f.rowid "
            "ORDER BY round(f.s, 6), m.updated_at DESC LIMIT ?",
            [*args, max(limit * 4, MIN_POOL), limit],
        )
        return [Memory(*row) for row in rows]

    async def _doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """How many facts contain each term (one statement; each count reads one doclist)."""
        if not terms:
            return {}
        count = "(SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?)"
        rows = await self.fetch_all(
            "SELECT " + ", ".join([count] * len(terms)), [f'"{t}"' for t in terms]
        )
        return dict(zip(terms, (int(n) for n in rows[0]), strict=True))

    async def _recent_floor(self, term: str) -> int:
        """The rowid below the ``SCORE_BUDGET`` newest facts containing ``term``."""
        rows = await self.fetch_all(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (f'"{term}"', SCORE_BUDGET),
        )
        return int(rows[0][0]) if rows else 0

    async def by_ids(self, ids: Sequence[int]) -> dict[int, Memory]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        sql = f"SELECT {COLUMNS} FROM memories AS m WHERE m.id IN ({marks})"
        rows = await self.fetch_all(sql, ids)
        return {row[0]: Memory(*row) for row in rows}

    async def vectors(self, model: str, after_id: int, limit: int) -> list[tuple[int, bytes]]:
        """``(id, blob)`` made by ``model``, by id after ``after_id`` (loads the index in pages)."""
        rows = await self.fetch_all(
            "SELECT id, embedding FROM memories WHERE embedding_model = ? AND id > ? "
            "ORDER BY id LIMIT ?",
            (model, after_id, limit),
        )
        return [(int(i), bytes(blob)) for i, blob in rows]

    async def unembedded(self, model: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        """``(id, text)`` of memories with no vector from ``model``, by id after ``after_id``."""
        rows = await self.fetch_all(
            "SELECT id, text FROM memories WHERE embedding_model IS NOT ? AND id > ? "
            "ORDER BY id LIMIT ?",
            (model, after_id, limit),
        )
        return [(int(i), str(text)) for i, text in rows]

    async def count_embedded(self, model: str) -> int:
        rows = await self.fetch_all(
            "SELECT count(*) FROM memories WHERE embedding_model = ?", (model,)
        )
        return int(rows[0][0])

    async def find_duplicate(self, text: str, threshold: float) -> Memory | None:
        """A stored fact with the same normalised text, or token Jaccard ≥ ``threshold``."""
        rows = await self.fetch_all(
            f"SELECT {COLUMNS} FROM memories AS m WHERE m.norm = ? LIMIT 1", (normalise(text),)
        )
        if rows:
            return Memory(*rows[0])
        for candidate in await self.search(text, DEDUPE_CANDIDATES):
            if jaccard(text, candidate.text) >= threshold:
                return candidate
        return None
