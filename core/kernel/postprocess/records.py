"""What post-processing leaves with a turn, written with the turn's ledger row.

A ``PostTurnRecord`` holds the user's original text, the clean text the
model saw, the specs, every result, the progress events and the token
totals. The router hands it to ``LedgerSession.commit_turn``, which calls
``write_to`` inside the same transaction as the reply and the history: a
turn is recorded whole or not at all, and ``/last`` reads it back after any
restart. Rows are keyed by the message
(the ledger key) and pruned with the ledger's retention. ``PostRecords``
reads them on either database (``core.storage``, ADR 0051); the tables are
the ``sessions`` component's.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.extensions.contract import PostProcessResult
from core.kernel.postprocess.parsing import PostSpec
from core.storage import Database, Executor, insertion_order, upsert

if TYPE_CHECKING:
    pass

__all__ = ["PostRecords", "PostTurnRecord", "StoredResult"]

_TURNS = upsert(
    "hearth_post_turns",
    (
        "message_key",
        "conversation",
        "session_id",
        "original",
        "clean",
        "specs",
        "events",
        "usage",
        "created_at",
    ),
    ("message_key",),
)
_RESULTS = upsert(
    "hearth_post_results",
    ("message_key", "seq", "conversation", "name", "result", "created_at"),
    ("message_key", "seq"),
)


@dataclass(frozen=True, slots=True)
class PostTurnRecord:
    """One message's post-processing: the specs it asked for and what they gave."""

    message_key: str
    conversation: str
    session_id: str | None
    original: str
    clean: str
    specs: tuple[PostSpec, ...]
    results: tuple[PostProcessResult, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    usage: dict[str, Any] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    async def write_to(self, tx: Executor) -> None:
        """The rows, inside the ledger's open transaction (``LedgerWrite``) or one of
        their own."""
        for sql, rows in self._statements():
            await tx.execute_many(sql, rows)

    def _statements(self) -> list[tuple[str, list[tuple[Any, ...]]]]:
        turn = (
            self.message_key,
            self.conversation,
            self.session_id,
            self.original,
            self.clean,
            json.dumps([s.to_dict() for s in self.specs]),
            json.dumps(list(self.events), default=str),
            json.dumps(self.usage),
            self.created_at,
        )
        results = [
            (
                self.message_key,
                seq,
                self.conversation,
                result.name,
                json.dumps(result.to_dict(), default=str),
                self.created_at,
            )
            for seq, result in enumerate(self.results)
        ]
        return [(_TURNS, [turn]), (_RESULTS, results)]


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A result read back, with the message it answered."""

    result: PostProcessResult
    original: str
    created_at: float


class PostRecords:
    """Prunes the records at open and reads them back for ``/last``."""

    def __init__(self, db: Database, *, retention_s: float) -> None:
        self.db = db
        self.retention_s = retention_s

    async def open(self) -> None:
        """Open (and migrate) the database; drop records older than the ledger keeps."""
        await self.db.open()
        cutoff = time.time() - self.retention_s
        async with self.db.transaction() as tx:
            await tx.execute("DELETE FROM hearth_post_results WHERE created_at < ?", cutoff)
            await tx.execute("DELETE FROM hearth_post_turns WHERE created_at < ?", cutoff)

    async def aclose(self) -> None:
        await self.db.close()

    async def latest(self, conversation: str, name: str | None = None) -> list[StoredResult]:
        """The newest result named ``name``, or every result of the newest turn."""
        args = [conversation] if name is None else [conversation, name]
        where = "r.conversation = ?" + ("" if name is None else " AND r.name = ?")
        order = insertion_order(self.db.dialect, "id")
        rows = await self.db.fetch_all(
            "SELECT r.result, t.original, r.created_at FROM hearth_post_results r"
            " JOIN hearth_post_turns t ON t.message_key = r.message_key"
            f" WHERE {where} AND r.message_key = ("
            f"  SELECT r.message_key FROM hearth_post_results r WHERE {where}"
            f"  ORDER BY r.created_at DESC, r.{order} DESC LIMIT 1)"
            " ORDER BY r.seq",
            *args,
            *args,
        )
        found = [
            StoredResult(PostProcessResult.from_dict(json.loads(raw)), str(original), float(at))
            for raw, original, at in rows
        ]
        return [s for s in found if name is None or s.result.name == name]
