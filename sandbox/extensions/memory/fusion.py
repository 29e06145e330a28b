"""Combining the word ranking (BM25) with the meaning ranking (cosine).

``relative`` (the default, docs/adr/0066-words-count-when-they-decide.md,
after 0060) has no constant fitted to any set of questions: each candidate
scores its cosine plus its *word coverage* times the *spread* of the query's
cosines, and the words count only when they are *decisive* —

* the spread is the standard deviation of the query's cosine over every
  memory: how far apart this query's similarities lie, measured on the
  query itself, whatever the model's scale (e5's cosines all sit in
  [0.7, 1], an endpoint's elsewhere);
* the coverage is the fact's BM25 as a share of what a fact of average
  length holding every term of the query once would score (``Σ idf``): a
  fact with all the query's rare words gains about one spread (a little more
  when it is short: BM25's length normalisation, bounded by its ``k1 + 1``),
  one sharing a common word almost nothing;
* the words are decisive when the best word match reaches that full-match
  score: some fact says what the query says in its own words (a name, a
  number, the same terms). Otherwise the query was put in other words than
  any fact, the words it shares with facts are incidental, and the meaning
  ranking stands alone: on bench/memory_heldout.json's tuning half, such
  partial overlaps only ever pushed a wrong fact up ("my rehab appointment"
  → the dentist appointment), never the right one.

So words decide between facts of about the same meaning when they say the
query's words, a fact found by a name or a number enters the results, and
an incidental shared word cannot reorder what the meaning found.

Two older rules stay selectable (``embeddings.fusion``): ``convex``
(``0.98·max(cosine, floor) + 0.02·bm25/best`` with an absolute cosine floor,
ADR 0029) and ``rrf`` (``Σ 1/(60 + rank)``). Both constants of ``convex``
were set on bench/memory.py's paraphrase set; on the held-out set
(bench/memory_heldout.json) ``convex`` and ``rrf`` fall below the plain
vector ranking, ``relative`` does not fall further than a few questions.
"""

from __future__ import annotations

import math
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


def full_match_score(doc_freqs: dict[str, int], total: int) -> float:
    """BM25 (FTS5's idf) of a fact holding each of the query's terms once, at the
    average length: ``Σ idf``. A term no fact holds counts too (the query asks for
    something no fact says in those words)."""
    return sum(idf(df, total) for df in doc_freqs.values())


def idf(df: int, total: int) -> float:
    """FTS5's BM25 idf of a term held by ``df`` of ``total`` documents (never below 1e-6)."""
    total = max(total, df, 1)
    return max(math.log((total - df + 0.5) / (df + 0.5)), 1e-6)


def relative_fusion(
    lexical: Sequence[tuple[int, float]],
    cosines: dict[int, float],
    spread: float,
    full_match: float,
) -> dict[int, float]:
    """``id -> cosine + spread · bm25 / full_match`` over every candidate, the words
    of a candidate with a vector counted only when the best of them reaches
    ``full_match`` (they are decisive).

    ``cosines`` holds the cosine of every candidate that has a vector; a BM25
    hit without one (not embedded yet) counts as the lowest cosine seen plus its
    words, decisive or not: the meaning did not find it, words are all it has. A
    spread of 0 (fewer than two vectors: no distribution yet) leaves words to
    decide, decisive or not: there is no meaning ranking to stand alone.
    """
    lowest = min(cosines.values(), default=0.0)
    best = max((score for _, score in lexical), default=0.0)
    decisive = spread <= 0 or best >= full_match
    spread = spread if spread > 0 else 1.0
    words = (
        {memory_id: max(score, 0.0) / full_match for memory_id, score in lexical}
        if full_match > 0
        else {}
    )
    fused: dict[int, float] = {}
    for memory_id in {*cosines, *words}:
        cosine = cosines.get(memory_id)
        if cosine is None:
            fused[memory_id] = lowest + spread * words[memory_id]
        else:
            fused[memory_id] = cosine + (spread * words.get(memory_id, 0.0) if decisive else 0.0)
    return fused
