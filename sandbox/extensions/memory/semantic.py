"""Meaning-based recall: the embedding backend, the vector index, the backfill.

``SemanticRecall`` owns what the ``embeddings`` config asks for. The backend is
a shared service created on first use (``context.services.get_or_create``; the
local model loads in a worker thread, never on the event loop). Whatever goes
wrong — ``onnxruntime`` missing, the model failing to load, the endpoint down —
recall falls back to words (BM25) and the log says so ONCE, until it works
again. Memories stored before embeddings existed (or by another model) are
embedded by ``backfill`` in the background, a few at a time, in id order;
its state is the rows themselves, so a restart resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from core.extensions.contract import SharedServices

from .config import EmbeddingsConfig
from .embeddings import LOCAL_MODEL, Embedder, EmbeddingError, EndpointEmbedder, LocalEmbedder
from .heap import return_freed_memory
from .model_process import ProcessEmbedder
from .store import MemoryStore
from .text import first_person
from .vectors import IndexView, VectorIndex, to_blob

LOAD_PAGE = 5000
QUERY_CACHE = 32
PROGRESS_EVERY_S = 10.0
RETRY_S = 5.0


class Found(NamedTuple):
    """What a meaning search found: the query's vector, its nearest memories and the
    standard deviation of its cosine over every memory."""

    vector: np.ndarray
    hits: list[tuple[int, float]]
    spread: float


class SemanticRecall:
    """Vectors for memory, or ``None`` everywhere when they are off or broken."""

    def __init__(
        self,
        config: EmbeddingsConfig,
        services: SharedServices,
        store: MemoryStore,
        log: logging.Logger,
        api_key: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.config = config
        self.cache_dir = cache_dir  # where the local model keeps its built ONNX file
        self.store = store
        self.log = log
        self.model = LOCAL_MODEL if config.backend == "local" else str(config.model)
        self.index = VectorIndex()
        self._services = services
        self._api_key = api_key
        self._embedder: Embedder | None = None
        self._broken: str | None = None  # the local model could not load: stay on BM25
        self._warned = False
        self._last_error = ""
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self.query_cache_size = QUERY_CACHE  # recent query vectors kept (0: none)
        self._pending = asyncio.Event()  # a write stored no vector: the backfill has work
        self.backfilled = 0

    @property
    def enabled(self) -> bool:
        return self.config.backend != "none"

    @property
    def service_key(self) -> str:
        """The shared-service key: one backend per endpoint, model and credential."""
        if self.config.backend == "local":
            return f"memory:embeddings:local:{LOCAL_MODEL}"
        return embedding_service_key(str(self.config.base_url), self.model, self._api_key)

    async def load_index(self) -> None:
        """Read the stored vectors of the current model into the index, a page at a time."""
        if not self.enabled:
            return
        self.index.reserve(await self.store.count_embedded(self.model) + LOAD_PAGE)
        after = 0
        while page := await self.store.vectors(self.model, after, LOAD_PAGE):
            for memory_id, blob in page:
                self.index.add_blob(memory_id, blob)
            after = page[-1][0]
        return_freed_memory()  # the pages read are garbage now

    # ------------------------------------------------------------- embedding

    async def query_vector(self, text: str) -> np.ndarray | None:
        """The query's unit vector (recent ones cached), or None: use words only."""
        cached = self._cached(text)
        if cached is not None:
            return cached
        rows = await self._embed([text], "query")
        if rows is None:
            return None
        self._cache(text, rows[0])
        return rows[0]

    async def search(self, text: str, k: int) -> Found | None:
        """The query's unit vector, ``(id, cosine)`` of its ``k`` nearest memories (best
        first; with ``fusion: convex`` only those at or above its floor) and the spread
        of the query's cosines over every memory; or None: use words only.

        With the local model the query is embedded and the index scanned in ONE
        worker thread: one hop off the loop and back, not two (on a loaded
        machine each hop can wait behind other work). The per-turn context
        provider and a ``recall`` of the same text share the cached vector.
        """
        view = self.index.view()
        vector = self._cached(text)
        if vector is None:
            embedder = await self._backend()
            if isinstance(embedder, LocalEmbedder):
                return await self._embed_and_scan(embedder, text, view, k)
            vector = await self.query_vector(text)
            if vector is None:
                return None
        hits, spread = await asyncio.to_thread(view.nearest_and_spread, vector, k)
        return Found(vector, self._floored(hits), spread)

    def _floored(self, hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Hits under an absolute cosine are dropped by ``convex`` fusion, or when
        ``min_similarity`` is set; the default ``relative`` fusion has no floor (ADR 0060)."""
        if self.config.fusion != "convex" and self.config.min_similarity is None:
            return hits
        floor = self.config.similarity_floor
        return [(i, c) for i, c in hits if c >= floor]

    async def _embed_and_scan(
        self, embedder: LocalEmbedder, text: str, view: IndexView, k: int
    ) -> Found | None:
        query = first_person(self._bounded(text))

        def work() -> tuple[np.ndarray, list[tuple[int, float]], float]:
            vector = embedder.embed_sync([query], "query")[0]
            return vector, *view.nearest_and_spread(vector, k)

        try:
            vector, hits, spread = await asyncio.to_thread(work)
        except (EmbeddingError, ValueError, OSError) as exc:
            self._degrade(f"{type(exc).__name__}: {exc}")
            return None
        self._recovered()
        self._cache(text, vector)
        return Found(vector, self._floored(hits), spread)

    def _cached(self, text: str) -> np.ndarray | None:
        cached = self._queries.get(text)
        if cached is not None:
            self._queries.move_to_end(text)
        return cached

    def _cache(self, text: str, vector: np.ndarray) -> None:
        self._queries[text] = vector
        while len(self._queries) > self.query_cache_size:
            self._queries.popitem(last=False)

    async def passage_blobs(self, texts: list[str]) -> list[bytes] | None:
        """Stored-form vectors of facts, or None when the backend is unavailable."""
        rows = await self._embed(texts, "passage")
        return None if rows is None else [to_blob(row) for row in rows]

    def _bounded(self, query: str) -> str:
        """The query's first ``query_max_chars`` characters, cut at a space.

        Embedding time grows with the tokens (~0.8 ms each for e5-small on one
        core here): a long prompt would make every turn's context lookup cost
        hundreds of milliseconds; its start carries the topic.
        """
        limit = self.config.query_max_chars
        if len(query) <= limit:
            return query
        cut = query[:limit]
        return cut.rsplit(" ", 1)[0] if " " in cut else cut

    async def _embed(self, texts: list[str], role: Any) -> np.ndarray | None:
        embedder = await self._backend()
        if embedder is None:
            return None
        if role == "query":
            texts = [self._bounded(text) for text in texts]
        if self.config.backend == "local":  # measured for e5: see text.first_person
            texts = [first_person(text) for text in texts]
        try:
            rows = await embedder.embed(texts, role)
        except (EmbeddingError, ValueError, OSError) as exc:
            self._degrade(f"{type(exc).__name__}: {exc}")
            return None
        self._recovered()
        return rows

    def _recovered(self) -> None:
        if self._warned:
            self._warned = False
            self.log.info("memory: embeddings work again (%s); recall ranks by meaning", self.model)

    async def _backend(self) -> Embedder | None:
        if not self.enabled or self._broken is not None:
            return None
        if self._embedder is None:
            try:
                self._embedder = await self._services.get_or_create(
                    self.service_key, self._factory()
                )
            except Exception as exc:  # ImportError, a model file missing, a bad endpoint
                self._broken = f"{type(exc).__name__}: {exc}"
                self._degrade(self._broken)
                return None
        return self._embedder

    def _factory(self) -> Callable[[], Embedder]:
        cfg = self.config
        if cfg.backend == "local":
            cache_dir, idle_exit_s, log = self.cache_dir, cfg.idle_exit_s, self.log
            if idle_exit_s is not None:  # the model in a process of its own (ADR 0104)
                return lambda: ProcessEmbedder(log, cfg.threads, cache_dir, idle_exit_s).start()
            return lambda: LocalEmbedder(cfg.threads, cache_dir)
        base_url, model, key = str(cfg.base_url), self.model, self._api_key
        return lambda: EndpointEmbedder(base_url, model, key, cfg.timeout_s)

    def _degrade(self, reason: str) -> None:
        self._last_error = reason
        self._pending.set()  # facts stored meanwhile get their vectors once it works
        if self._warned:
            return
        self._warned = True
        self.log.warning(
            "memory: embeddings unavailable (backend %s, model %s): %s — recall ranks by "
            "words only (BM25) until they work; to turn them off set "
            "extensions.memory.embeddings.backend: none",
            self.config.backend,
            self.model,
            reason,
        )

    # ------------------------------------------------------------- the index

    async def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        return await self.index.nearest(vector, k, self.config.similarity_floor)

    def wake(self) -> None:
        """Memories were added without vectors (an import): let the backfill look."""
        self._pending.set()

    def stored(self, memory_id: int, blob: bytes | None) -> None:
        """A write finished: index its vector, or leave it to the backfill."""
        if blob is None:
            self._pending.set()
        else:
            self.index.add_blob(memory_id, blob)

    # -------------------------------------------------------------- backfill

    async def backfill(self, write_lock: asyncio.Lock) -> None:
        """Embed every memory that has no vector from this model; then wait for more.

        Runs as the extension's background service; ``write_lock`` keeps a
        forget from racing the index update.
        """
        if not self.enabled:
            return
        while True:
            self._pending.clear()
            await self._backfill_pass(write_lock)
            await self._pending.wait()
            while self._warned and self._broken is None:  # failing: retry every few seconds
                await asyncio.sleep(RETRY_S)
                await self._embed(["ping"], "passage")
            if self._broken is not None:
                return  # nothing fixes a model that cannot load in this process

    async def _backfill_pass(self, write_lock: asyncio.Lock) -> None:
        total = await self._count_missing()
        if total == 0:
            return
        self.log.info("memory: embedding %d memories in the background (%s)", total, self.model)
        done, after, started, reported = 0, 0, time.monotonic(), time.monotonic()
        while page := await self.store.unembedded(self.model, after, self.config.backfill_batch):
            blobs = await self.passage_blobs([text for _, text in page])
            if blobs is None:
                self.log.info("memory: backfill paused after %d of %d memories", done, total)
                return
            rows = [(memory_id, blob) for (memory_id, _), blob in zip(page, blobs, strict=True)]
            async with write_lock:
                alive = set(await self.store.set_embeddings(rows, self.model))
                for memory_id, blob in rows:
                    if memory_id in alive:
                        self.index.add_blob(memory_id, blob)
            done += len(rows)
            self.backfilled += len(rows)
            after = page[-1][0]
            if time.monotonic() - reported >= PROGRESS_EVERY_S:
                reported = time.monotonic()
                self.log.info("memory: embedded %d of %d memories", done, total)
        took = time.monotonic() - started
        self.log.info("memory: embedded %d memories in %.1f s (%s)", done, took, self.model)

    async def _count_missing(self) -> int:
        return await self.store.count() - await self.store.count_embedded(self.model)

    # ---------------------------------------------------------------- status

    async def status_lines(self) -> list[str]:
        """Backend, model and how many memories have a vector (doctor, /status)."""
        if not self.enabled:
            return ["embeddings: off (backend none): recall ranks by words (BM25)"]
        total = await self.store.count()
        embedded = await self.store.count_embedded(self.model)
        working = await self._embed(["status check"], "query") is not None  # loads it if need be
        state = "working" if working else f"unavailable ({self._last_error})"
        if not working:
            state += "; recall ranks by words (BM25) meanwhile"
        engine = getattr(self._embedder, "engine", None)
        model = f"{self.model} on {engine}" if engine else self.model
        return [
            f"embeddings: backend {self.config.backend}, model {model}, {state}",
            f"embedded: {embedded} of {total} memories",
        ]


def embedding_service_key(base_url: str, model: str, api_key: str | None) -> str:
    """One endpoint client per endpoint, model and credential; the key is logged, so the
    credential appears only as a short fingerprint."""
    fingerprint = hashlib.sha256(api_key.encode()).hexdigest()[:12] if api_key else "none"
    return f"memory:embeddings:{base_url.rstrip('/')}|{model}|{fingerprint}"
