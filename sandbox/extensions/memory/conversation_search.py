"""Search over past conversations: every stored turn, by words and by meaning.

Fed by the turn itself: the context provider sees the person's message
(``heard``), ``on_turn_end`` the answer (``ended``); an answered turn stores
both in ``TurnStore`` at once (one short write, no model call: no turn waits
for the embedding). The background loop (``run``) embeds new turns with the
shared model, a page at a time, into one int8 index per person, once the
conversations pause (``QUIET_S``; at the latest ``LATEST_S`` after a turn) so
the model does not take a core from a turn in progress; a search embeds what
is still waiting first. It also deletes
turns older than ``keep_days`` — the time the kernel's ledger keeps an
answered message (``LEDGER_RETENTION_S``, 30 days), so the index never
outlives the history it points at. Ranking is memory's ``relative`` fusion
(``fusion.py``, ADR 0060) over the union of the best word and meaning
matches inside the asked time range.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agents import FunctionTool, RunContextWrapper, function_tool

from core.extensions.contract import Command, TurnContext, TurnOutcome

from .fusion import full_match_score, idf, relative_fusion
from .semantic import SemanticRecall
from .text import query_terms, tokens
from .turn_store import StoredTurn, TurnStore, who_of
from .vectors import VectorIndex

POOL = 50  # candidates of each ranking
WIDE_POOL = 400  # meaning candidates when a time range will drop some
EMBED_PAGE = 16
PURGE_EVERY_S = 3600.0
RETRY_S = 5.0
QUIET_S = 2.0  # new turns are embedded once no turn has ended for this long,
LATEST_S = 30.0  # or this long after the first of them, while turns keep coming
HEARD_KEPT = 256  # messages waiting for their turn's end (a turn that never ends is dropped)
SNIPPET_CHARS = 240
RESULTS = 8


@dataclass(frozen=True, slots=True)
class Window:
    """``[since, until)`` in epoch seconds."""

    since: float = 0.0
    until: float = float("inf")


class ConversationSearch:
    """The turn index of every person, its background upkeep and its search."""

    def __init__(
        self, store: TurnStore, semantic: SemanticRecall, log: logging.Logger, keep_days: float
    ) -> None:
        self.store = store
        self.semantic = semantic  # the owner's: its embedding backend is the shared model
        self.log = log
        self.keep_s = keep_days * 86400.0
        self.indexes: dict[str, VectorIndex] = {}
        self._heard: OrderedDict[str, str] = OrderedDict()
        self._pending = asyncio.Event()
        self._embedding = asyncio.Lock()  # the loop and a search: one page at a time
        self.embedded = 0

    async def open(self) -> None:
        await self.store.open()
        if not self.semantic.enabled:
            return
        after = 0
        while page := await self.store.vectors(self.semantic.model, after, 5000):
            for turn_id, who, blob in page:
                self._index(who).add_blob(turn_id, blob)
            after = page[-1][0]
        self._pending.set()  # turns stored before a restart may lack vectors

    def _index(self, who: str) -> VectorIndex:
        index = self.indexes.get(who)
        if index is None:
            index = self.indexes[who] = VectorIndex()
        return index

    # ------------------------------------------------------------- feeding

    def heard(self, turn: TurnContext, text: str) -> None:
        """The person's message of a turn in progress (the context provider's prompt)."""
        self._heard[_turn_key(turn)] = text
        while len(self._heard) > HEARD_KEPT:
            self._heard.popitem(last=False)

    async def ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        """Store an answered turn's message and answer; anything else is forgotten."""
        said = self._heard.pop(_turn_key(turn), None)
        if outcome.status != "answered" or not turn.channel_id:
            return
        now = time.time()
        messages = [("user", said, now)] if said and said.strip() else []
        if outcome.reply.strip():
            messages.append(("assistant", outcome.reply, now))
        await self.record(turn, messages)

    async def record(self, turn: TurnContext, messages: list[tuple[str, str, float]]) -> None:
        """Store ``(role, text, created_at)`` messages of ``turn``'s conversation."""
        if not messages:
            return
        conversation = f"{turn.channel_id}:{turn.user_id or ''}"
        await self.store.add(who_of(turn.person_key), conversation, turn.session_id or "", messages)
        self._pending.set()

    # ---------------------------------------------------------- background

    async def run(self) -> None:
        """Embed new turns and purge old ones, for as long as the extension runs."""
        last_purge = 0.0
        while True:
            if time.monotonic() - last_purge >= PURGE_EVERY_S or last_purge == 0.0:
                await self.purge()
                last_purge = time.monotonic()
            self._pending.clear()  # before embedding: a turn stored meanwhile sets it again
            if self.semantic.enabled and not await self.embed_pending():
                await asyncio.sleep(RETRY_S)  # the backend fails: try again shortly
                continue
            try:
                async with asyncio.timeout(PURGE_EVERY_S):
                    await self._pending.wait()
            except TimeoutError:
                continue
            await self._quiet()

    async def _quiet(self) -> None:
        """Until no turn has ended for ``QUIET_S``, or ``LATEST_S`` have passed: on a
        small machine the model beside a turn in progress slows that turn down (its
        tokenizer holds the interpreter, its engine a core); between turns it is free."""
        deadline = time.monotonic() + LATEST_S
        while (left := deadline - time.monotonic()) > 0:
            self._pending.clear()
            try:
                async with asyncio.timeout(min(QUIET_S, left)):
                    await self._pending.wait()
            except TimeoutError:
                return

    async def embed_pending(self) -> bool:
        """Embed every turn without a vector; False when the backend failed."""
        model = self.semantic.model
        async with self._embedding:
            while page := await self.store.unembedded(model, EMBED_PAGE):
                blobs = await self.semantic.passage_blobs([text for _, _, text in page])
                if blobs is None:
                    return False
                rows = [(turn_id, blob) for (turn_id, _, _), blob in zip(page, blobs, strict=True)]
                await self.store.set_embeddings(rows, model)
                for (turn_id, who, _), blob in zip(page, blobs, strict=True):
                    self._index(who).add_blob(turn_id, blob)
                self.embedded += len(rows)
        return True

    async def purge(self) -> int:
        """Delete the turns older than ``keep_days`` (store and index)."""
        gone = await self.store.purge(time.time() - self.keep_s)
        for turn_id, who in gone:
            self._index(who).remove(turn_id)
        if gone:
            self.log.info("memory: %d conversation turns past their retention deleted", len(gone))
        return len(gone)

    # -------------------------------------------------------------- search

    async def search(
        self, query: str, person: str | None, window: Window | None = None, limit: int = RESULTS
    ) -> list[StoredTurn]:
        """``person``'s turns best matching ``query`` inside ``window``, best first."""
        window = window or Window()
        who = who_of(person)
        if self.semantic.enabled:  # the turns the loop has not embedded yet count too
            await self.embed_pending()
        terms = query_terms(query)
        words = await self.store.words(who, terms, window.since, window.until, POOL)
        found = {t.id: t for t in words}
        lexical: list[tuple[int, float]] = []
        full = 0.0
        if words:
            freqs, total = await self.store.doc_freqs(who, terms)
            full = full_match_score(freqs, total)
            for t in words:
                held = set(tokens(t.text))
                lexical.append((t.id, sum(idf(df, total) for w, df in freqs.items() if w in held)))
        cosines: dict[int, float] = {}
        spread = 0.0
        index = self.indexes.get(who)
        vector = None
        if index is not None and len(index) and self.semantic.enabled:
            vector = await self.semantic.query_vector(query)
        if vector is not None and index is not None:
            pool = POOL if window == Window() else WIDE_POOL
            hits, spread = await asyncio.to_thread(index.view().nearest_and_spread, vector, pool)
            inside = await self.store.by_ids(who, [i for i, _ in hits], window.since, window.until)
            found |= {t.id: t for t in inside}
            cosines = {i: c for i, c in hits if i in found}
            cosines |= index.similarities([t.id for t in words], vector)
        if not found:
            return []
        fused = relative_fusion(lexical, cosines, spread, full)
        best = sorted(fused, key=lambda i: (-fused[i], -found[i].created_at))
        return [found[i] for i in best[:limit]]


def _turn_key(turn: TurnContext) -> str:
    return turn.turn_id or f"{turn.channel_id}:{turn.user_id}:{turn.session_id}"


def parse_when(value: str | None, name: str, *, end: bool = False) -> float | None:
    """``YYYY-MM-DD`` (``end``: through that day) or an ISO 8601 time (UTC if no
    zone) as epoch seconds; ``None`` for nothing. A bad value raises ``ValueError``
    naming ``name`` and the value."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{name}: {value!r} is not a date (YYYY-MM-DD) or an ISO 8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if end and len(text) == 10:  # a whole day: up to its end
        when += timedelta(days=1)
    return when.timestamp()


def window_of(since: str | None, until: str | None) -> Window:
    """The search window of a tool call's ``since`` / ``until`` (``ValueError`` if bad)."""
    start = parse_when(since, "since")
    stop = parse_when(until, "until", end=True)
    window = Window(start if start is not None else 0.0, stop if stop is not None else float("inf"))
    if window.since >= window.until:
        raise ValueError(f"since {since!r} is not before until {until!r}")
    return window


def when_text(ts: float) -> str:
    """``2026-11-20 14:03 UTC``: how memory shows a moment (facts and turns alike)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def format_turns(turns: list[StoredTurn], query: str) -> str:
    """One dated snippet per turn, with the conversation it comes from."""
    if not turns:
        return f"no past conversation matches {query!r}"
    lines = []
    for t in turns:
        when = when_text(t.created_at)
        speaker = "you" if t.role == "user" else "Hearth"
        text = " ".join(t.text.split())
        if len(text) > SNIPPET_CHARS:
            text = text[: SNIPPET_CHARS - 1].rsplit(" ", 1)[0] + "…"
        lines.append(f"{when}, conversation {t.conversation}, {speaker}: {text}")
    return "\n".join(lines)


def search_tool(search: ConversationSearch) -> FunctionTool:
    """The model's ``search_conversations`` tool over the turn's person's turns."""

    @function_tool
    async def search_conversations(
        ctx: RunContextWrapper[Any], query: str, since: str | None = None, until: str | None = None
    ) -> str:
        """Search what was said in past conversations (the user's messages and your answers).

        Finds by words and by meaning ("what did I say about the boiler?"). Returns dated
        snippets, best match first, each with the conversation it comes from.

        Args:
            query: What to look for, in plain words.
            since: Only turns at or after this date (YYYY-MM-DD or ISO 8601), optional.
            until: Only turns up to this date, that whole day included (YYYY-MM-DD or ISO 8601),
                optional.
        """
        try:
            window = window_of(since, until)
        except ValueError as exc:
            return f"error: {exc}"
        turn = ctx.context
        person = turn.person_key if isinstance(turn, TurnContext) else None
        return format_turns(await search.search(query, person, window), query)

    return search_conversations


def search_command(search: ConversationSearch) -> Command:
    """``/search TEXT``: the person's own past turns matching TEXT."""

    async def run(args: str, turn: TurnContext) -> str:
        if not args.strip():
            return "usage: /search TEXT — find what was said in past conversations"
        return format_turns(await search.search(args, turn.person_key), args.strip())

    return Command("search", "find what was said in past conversations", run)
