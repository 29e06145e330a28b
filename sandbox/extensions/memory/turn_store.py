"""The stored turns of every conversation, searchable by words (ADR 0060).

One row per message: the person's (``user``) and Hearth's answer
(``assistant``), with whose it is (``who``: ``owner`` or ``member:<name>``),
the conversation (``channel:user``), the session and when. Every query names
``who``: no search of one person reaches another's turns. The store is the
library's ``Store`` (ADR 0035): SQLite in the data dir, or the extension's
schema in the kernel's PostgreSQL, so every process of a scale-out indexes
into, and searches, one place. Words: FTS5 (SQLite) or a ``simple``
``tsvector`` (PostgreSQL), both without stemming, so the word evidence of a
turn is the same on either. Vectors come later, from the background.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.extensions.sdk import Store

from .text import match_any

SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    id              INTEGER PRIMARY KEY,
    who             TEXT NOT NULL,
    conversation    TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    role            TEXT NOT NULL,
    text            TEXT NOT NULL,
    created_at      REAL NOT NULL,
    embedding       BLOB,
    embedding_model TEXT
);
CREATE INDEX IF NOT EXISTS turns_who_time ON turns (who, created_at);
CREATE INDEX IF NOT EXISTS turns_unembedded ON turns (embedding_model, id);
CREATE VIRTUAL TABLE IF NOT EXISTS turns_fts USING fts5 (
    text, content = 'turns', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS turns_ai AFTER INSERT ON turns BEGIN
    INSERT INTO turns_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS turns_ad AFTER DELETE ON turns BEGIN
    INSERT INTO turns_fts (turns_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""
POSTGRES_SCHEMA = (
    "CREATE TABLE turns (id bigserial PRIMARY KEY, who text NOT NULL,"
    " conversation text NOT NULL, session_id text NOT NULL, role text NOT NULL,"
    " text text NOT NULL, created_at double precision NOT NULL, embedding bytea,"
    " embedding_model text,"
    " words tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED);"
    " CREATE INDEX turns_who_time ON turns (who, created_at);"
    " CREATE INDEX turns_unembedded ON turns (embedding_model, id);"
    " CREATE INDEX turns_words ON turns USING gin (words)",
)
COLUMNS = "id, who, conversation, session_id, role, text, created_at"


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """One message of a conversation, as searched and shown."""

    id: int
    who: str
    conversation: str
    session_id: str
    role: str
    text: str
    created_at: float


def who_of(person: str | None) -> str:
    """The ``who`` of a person key: ``owner`` for ``None``, ``member:<name>`` else
    (a member named ``owner`` is still not the owner)."""
    return "owner" if person is None else f"member:{person}"


class TurnStore(Store):
    """The ``turns`` table on the kernel's backend."""

    SCHEMA = SCHEMA
    POSTGRES_SCHEMA = POSTGRES_SCHEMA

    def __init__(self, path: Path, **options: Any) -> None:
        super().__init__(path, **options)
        self._writing = asyncio.Lock()  # turn ends and the embedder write on one connection

    async def add(
        self, who: str, conversation: str, session_id: str, messages: list[tuple[str, str, float]]
    ) -> None:
        """Store ``(role, text, created_at)`` messages of one conversation, together: one
        statement (a turn's end costs one trip to the database thread, not four)."""
        if not messages:
            return
        rows = ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(messages))
        args = [
            value
            for role, text, created_at in messages
            for value in (who, conversation, session_id, role, text, created_at)
        ]
        async with self._writing:  # not inside another task's transaction
            await self.execute(
                "INSERT INTO turns (who, conversation, session_id, role, text, created_at) "
                f"VALUES {rows}",
                args,
            )

    async def words(
        self, who: str, terms: list[str], since: float, until: float, limit: int
    ) -> list[StoredTurn]:
        """Turns of ``who`` in ``[since, until)`` holding any of ``terms``, best first."""
        if not terms:
            return []
        if self.dialect == "postgres":
            sql = (
                f"SELECT {COLUMNS} FROM turns, to_tsquery('simple', ?) AS q "
                "WHERE words @@ q AND who = ? AND created_at >= ? AND created_at < ? "
                "ORDER BY ts_rank(words, q) DESC, created_at DESC LIMIT ?"
            )
            query: Any = " | ".join(terms)
        else:
            sql = (
                f"SELECT {', '.join('t.' + c for c in COLUMNS.split(', '))} FROM turns_fts "
                "JOIN turns AS t ON t.id = turns_fts.rowid WHERE turns_fts MATCH ? "
                "AND t.who = ? AND t.created_at >= ? AND t.created_at < ? "
                "ORDER BY bm25(turns_fts), t.created_at DESC LIMIT ?"
            )
            query = match_any(terms)
        rows = await self.fetch_all(sql, [query, who, since, until, limit])
        return [StoredTurn(*row) for row in rows]

    async def doc_freqs(self, who: str, terms: list[str]) -> tuple[dict[str, int], int]:
        """How many of ``who``'s turns hold each term, and how many turns ``who`` has."""
        freqs = {}
        for term in terms:
            if self.dialect == "postgres":
                sql = (
                    "SELECT count(*) FROM turns WHERE who = ? AND words @@ to_tsquery('simple', ?)"
                )
                args: list[Any] = [who, term]
            else:
                sql = (
                    "SELECT count(*) FROM turns_fts JOIN turns AS t ON t.id = turns_fts.rowid "
                    "WHERE turns_fts MATCH ? AND t.who = ?"
                )
                args = [f'"{term}"', who]
            row = await self.fetch_one(sql, args)
            freqs[term] = int(row[0]) if row else 0
        total = await self.fetch_one("SELECT count(*) FROM turns WHERE who = ?", [who])
        return freqs, int(total[0]) if total else 0

    async def by_ids(
        self, who: str, ids: list[int], since: float, until: float
    ) -> list[StoredTurn]:
        """Those of ``ids`` that are ``who``'s turns in ``[since, until)``."""
        if not ids:
            return []
        args: list[Any]
        if self.dialect == "postgres":
            where, args = "id = ANY(?::bigint[])", [ids]
        else:
            where, args = f"id IN ({', '.join('?' * len(ids))})", [*ids]
        rows = await self.fetch_all(
            f"SELECT {COLUMNS} FROM turns WHERE {where} AND who = ? "
            "AND created_at >= ? AND created_at < ?",
            [*args, who, since, until],
        )
        return [StoredTurn(*row) for row in rows]

    async def unembedded(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """``(id, who, text)`` of the oldest turns without a vector of ``model``."""
        rows = await self.fetch_all(
            "SELECT id, who, text FROM turns WHERE embedding_model IS NULL "
            "OR embedding_model <> ? ORDER BY id LIMIT ?",
            [model, limit],
        )
        return [(int(i), str(w), str(t)) for i, w, t in rows]

    async def set_embeddings(self, rows: list[tuple[int, bytes]], model: str) -> None:
        async with self._writing, self.transaction():
            for turn_id, blob in rows:
                await self.execute(
                    "UPDATE turns SET embedding = ?, embedding_model = ? WHERE id = ?",
                    [blob, model, turn_id],
                )

    async def vectors(self, model: str, after: int, limit: int) -> list[tuple[int, str, bytes]]:
        """``(id, who, blob)`` of embedded turns after ``after``, in id order (a page)."""
        rows = await self.fetch_all(
            "SELECT id, who, embedding FROM turns WHERE embedding_model = ? AND id > ? "
            "ORDER BY id LIMIT ?",
            [model, after, limit],
        )
        return [(int(i), str(w), bytes(b)) for i, w, b in rows]

    async def purge(self, older_than: float) -> list[tuple[int, str]]:
        """Delete turns older than ``older_than``; ``(id, who)`` of those deleted."""
        async with self._writing, self.transaction():
            rows = await self.fetch_all(
                "SELECT id, who FROM turns WHERE created_at < ?", [older_than]
            )
            if rows:
                await self.execute("DELETE FROM turns WHERE created_at < ?", [older_than])
        return [(int(i), str(w)) for i, w in rows]
