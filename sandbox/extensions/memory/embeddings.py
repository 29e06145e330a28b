"""Optional embeddings: an OpenAI-compatible ``/embeddings`` client, an in-memory
vector index, and reciprocal rank fusion.

Vectors are L2-normalised float32 (stored as BLOBs), so cosine similarity is a
dot product. The index is a brute-force scan of at most ``scan_limit`` of the
most recently updated memories, run in a worker thread; this keeps the
extension free of native dependencies (see docs/adr/0008-memory-ranking.md).
"""

from __future__ import annotations

import asyncio
import math
import operator
from array import array
from collections.abc import Iterable, Sequence

import httpx

RRF_K = 60


class EmbeddingError(RuntimeError):
    """The embeddings endpoint failed or answered something unusable."""


class EmbeddingClient:
    """POST ``{base_url}/embeddings`` with ``{model, input}``; returns unit vectors."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, timeout=timeout_s)

    async def embed(self, text: str) -> array[float]:
        body = {"model": self.model, "input": [text], "encoding_format": "float"}
        try:
            response = await self._http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"{self.url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise EmbeddingError(f"{self.url}: HTTP {response.status_code}: {response.text[:200]}")
        try:
            vector = response.json()["data"][0]["embedding"]
            return unit_vector(float(x) for x in vector)
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EmbeddingError(f"{self.url}: unexpected response: {exc!r}") from exc

    async def aclose(self) -> None:
        await self._http.aclose()


def unit_vector(values: Iterable[float]) -> array[float]:
    vec = array("f", values)
    norm = math.sqrt(sum(x * x for x in vec))
    if not vec or norm == 0.0:
        raise ValueError("embedding is empty or all zeros")
    return array("f", (x / norm for x in vec))


def to_blob(vec: array[float]) -> bytes:
    return vec.tobytes()


def from_blob(blob: bytes) -> array[float]:
    vec = array("f")
    vec.frombytes(blob)
    return vec


class VectorIndex:
    """Unit vectors of the most recent memories, searched by brute force."""

    def __init__(self, scan_limit: int) -> None:
        self.scan_limit = scan_limit
        self._vectors: dict[int, array[float]] = {}

    def __len__(self) -> int:
        return len(self._vectors)

    def add(self, memory_id: int, vec: array[float]) -> None:
        self._vectors.pop(memory_id, None)
        self._vectors[memory_id] = vec  # insertion order = recency
        while len(self._vectors) > self.scan_limit:
            del self._vectors[next(iter(self._vectors))]

    def touch(self, memory_id: int) -> None:
        vec = self._vectors.pop(memory_id, None)
        if vec is not None:
            self._vectors[memory_id] = vec

    def remove(self, memory_id: int) -> None:
        self._vectors.pop(memory_id, None)

    async def nearest(self, query: array[float], k: int, min_similarity: float) -> list[int]:
        """Ids of the ``k`` most similar vectors at or above ``min_similarity``, best first."""
        items = list(self._vectors.items())
        return await asyncio.to_thread(_nearest, items, query, k, min_similarity)


def _nearest(
    items: Sequence[tuple[int, array[float]]], query: array[float], k: int, floor: float
) -> list[int]:
    scored: list[tuple[float, int]] = []
    dims = len(query)
    for memory_id, vec in items:
        if len(vec) != dims:  # stored by another embedding model
            continue
        similarity = sum(map(operator.mul, query, vec))
        if similarity >= floor:
            scored.append((similarity, memory_id))
    scored.sort(reverse=True)
    return [memory_id for _, memory_id in scored[:k]]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """``id -> Σ 1/(k + rank)`` over every ranking (rank from 1)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (k + rank)
    return fused
