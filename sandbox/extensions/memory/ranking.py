"""BM25 ranking with a bounded cost, whatever the store's size.

FTS5 computes ``bm25()`` for every row that matches, so an ``OR`` query with a
term found in a quarter of 100,000 facts ("lives", "birthday") scores 25,000
rows. The cost is capped at about ``SCORE_BUDGET`` rows:

* the query's terms are sorted by document frequency (a cheap count each);
* *anchors* are the rarest terms whose frequencies add up to at most the
  budget (at least one term); only facts containing an anchor are candidates;
* the remaining *common* terms still add to the score of those candidates:
  ``(anchors) AND (commons)`` scores the candidates holding both with every
  term, ``anchors`` scores the rest; a fact keeps its better score. Since a
  term that is absent adds exactly 0 to BM25 and IDF is global, both are the
  exact BM25 of the full query;
* if even the rarest term is too frequent, only its ``SCORE_BUDGET`` newest
  matches are candidates.

The one approximation: a fact sharing only very common words with the query
is not a candidate. Its BM25 would be small (common words have low IDF), and
when no rarer term exists the newest such facts are used instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from .text import match_any

SCORE_BUDGET = 5000


@dataclass(frozen=True, slots=True)
class SearchPlan:
    anchors: list[str]
    commons: list[str]
    recent_only: bool


def plan_search(doc_freqs: dict[str, int], budget: int = SCORE_BUDGET) -> SearchPlan | None:
    """Split the query's terms (``term -> matching facts``) into anchors and commons."""
    present = sorted((df, term) for term, df in doc_freqs.items() if df > 0)
    if not present:
        return None
    anchors: list[str] = []
    total = 0
    for df, term in present:
        if anchors and total + df > budget:
            break
        anchors.append(term)
        total += df
    commons = [term for _, term in present[len(anchors) :]]
    return SearchPlan(anchors, commons, recent_only=present[0][0] > budget)


SCORED = (
    "SELECT rowid, bm25(memories_fts) AS s FROM memories_fts "
    "WHERE memories_fts MATCH ? AND rowid > ?"
)


def scoring_query(plan: SearchPlan, floor_rowid: int) -> tuple[str, list[object]]:
    """SQL yielding ``(rowid, s)`` (``s`` = bm25, lower is better) for the plan's candidates."""
    anchors = match_any(plan.anchors)
    if not plan.commons:
        return SCORED, [anchors, floor_rowid]
    both = f"({anchors}) AND ({match_any(plan.commons)})"
    sql = f"SELECT rowid, min(s) AS s FROM ({SCORED} UNION ALL {SCORED}) GROUP BY rowid"
    return sql, [both, floor_rowid, anchors, floor_rowid]
