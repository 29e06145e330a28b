"""Combining the word ranking (BM25) with the meaning ranking (cosine).

Two ways, both measured by ``bench/memory.py`` on a paraphrase set (no
shared content words) and a lexical set (names and numbers):

* ``rrf`` — reciprocal rank fusion, ``Σ 1/(k + rank)``: scale-free, so one
  strong list cannot drown the other;
* ``convex`` — ``(1-w)·cosine + w·bm25/best`` for every candidate of either
  list, with ``w`` small (0.02): cosines of e5 differ by hundredths, so words
  decide between facts of about the same meaning, and a fact found only by
  its words still enters the results.

On the paraphrase set ``rrf`` loses facts the vectors alone find (0.81 top-5
against 0.90: BM25 hits on incidental words push them out), ``convex`` keeps
them (0.90, top-1 0.62 against 0.43); on the lexical set both score 1.0.
``convex`` is the default (docs/adr/0029-local-embeddings.md).
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60
BM25_WEIGHT = 0.02


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """``id -> Σ 1/(k + rank)`` over every ranking (rank from 1)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (k + rank)
    return fused


def convex_fusion(
    lexical: Sequence[tuple[int, float]],
    cosines: dict[int, float],
    floor: float,
    weight: float = BM25_WEIGHT,
) -> dict[int, float]:
    """``id -> (1-weight)·max(cosine, floor) + weight·bm25/best`` over every candidate.

    ``cosines`` holds the cosine of every candidate that has a vector (the
    vector hits and the BM25 hits alike), so each is judged on both signals;
    a BM25 hit without a vector, or below the floor, counts as the floor.
    """
    best = max((score for _, score in lexical), default=0.0)
    words = {memory_id: score / best for memory_id, score in lexical} if best > 0 else {}
    return {
        memory_id: (1 - weight) * max(cosines.get(memory_id, floor), floor)
        + weight * max(words.get(memory_id, 0.0), 0.0)
        for memory_id in {*cosines, *words}
    }
