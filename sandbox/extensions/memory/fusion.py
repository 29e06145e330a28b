"""Combining the word ranking (BM25) with the meaning ranking (cosine).

Two ways, both measured by ``bench/memory.py`` on a paraphrase set (no
shared content words) and a lexical set (names and numbers):

* ``rrf`` — reciprocal rank fusion, ``Σ 1/(k + rank)``: scale-free, so one
  strong list cannot drown the other;
* ``convex`` — ``w·cosine' + (1-w)·bm25'`` with each score rescaled to [0, 1]
  over the candidates (cosine from the similarity floor up, BM25 divided by
  the best), which keeps how much better the best match is.

The default is the one that scored better (docs/adr/0029-local-embeddings.md).
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60
VECTOR_WEIGHT = 0.6


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """``id -> Σ 1/(k + rank)`` over every ranking (rank from 1)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (k + rank)
    return fused


def convex_fusion(
    lexical: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    floor: float,
    weight: float = VECTOR_WEIGHT,
) -> dict[int, float]:
    """``id -> weight·cos' + (1-weight)·bm25'`` (each rescaled to [0, 1]; absent = 0)."""
    best = max((score for _, score in lexical), default=0.0)
    fused: dict[int, float] = {}
    if best > 0:
        for memory_id, score in lexical:
            fused[memory_id] = (1 - weight) * max(score, 0.0) / best
    span = max(1e-6, 1.0 - floor)
    for memory_id, cosine in semantic:
        share = weight * min(1.0, max(0.0, (cosine - floor) / span))
        fused[memory_id] = fused.get(memory_id, 0.0) + share
    return fused
