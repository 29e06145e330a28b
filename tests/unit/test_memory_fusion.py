"""The ``relative`` fusion of words and meaning (ADRs 0060, 0066) and the held-out set it
is measured on: the rule's edges, and the set's promises (size, no shared
content word, a split nothing can move)."""

from __future__ import annotations

import hashlib
import json

import pytest

from bench.memory_sets import HELDOUT, PARAPHRASE, heldout, shared_words
from sandbox.extensions.memory.fusion import full_match_score, relative_fusion


def best(fused: dict[int, float]) -> list[int]:
    return sorted(fused, key=lambda i: -fused[i])


def test_an_incidental_shared_word_does_not_push_out_the_meaning_hit():
    # 1 is the meaning hit; 2 shares one common word with the query (df 40 of 100)
    cosines = {1: 0.90, 2: 0.86, 3: 0.85}
    full = full_match_score({"appointment": 40, "optician": 0}, 100)
    fused = relative_fusion([(2, 0.4)], cosines, spread=0.02, full_match=full)
    assert best(fused)[0] == 1


def test_words_that_cover_only_part_of_the_query_leave_the_meaning_order_alone():
    # "Which weekday is my rehab appointment?": no fact says "weekday" or "rehab", the
    # dentist's appointment shares "appointment" and sits a hair under the meaning hit
    cosines = {1: 0.900, 2: 0.899, 3: 0.85}
    full = full_match_score({"weekday": 0, "rehab": 0, "appointment": 3}, 300)
    fused = relative_fusion([(2, 0.9 * full)], cosines, spread=0.02, full_match=full)
    assert best(fused) == [1, 2, 3]
    assert fused[2] == pytest.approx(0.899)


def test_a_fact_holding_every_rare_word_of_the_query_comes_first():
    # "Whose locker code is 4821?": the meaning ranks a look-alike first, the words decide
    cosines = {1: 0.91, 2: 0.90}
    full = full_match_score({"locker": 3, "code": 5, "4821": 1}, 300)
    fused = relative_fusion([(2, full), (1, 0.2 * full)], cosines, spread=0.02, full_match=full)
    assert best(fused) == [2, 1]


def test_unembedded_words_hits_count_as_the_lowest_cosine_and_words_order_them():
    fused = relative_fusion([(7, 3.0), (8, 1.0)], {1: 0.9, 2: 0.8}, spread=0.05, full_match=3.0)
    assert fused[7] == pytest.approx(0.8 + 0.05) and fused[8] == pytest.approx(0.8 + 0.05 / 3)
    assert best(fused)[0] == 1


def test_a_fact_not_embedded_yet_keeps_its_words_when_they_cover_part_of_the_query():
    # 7 was stored a moment ago (no vector yet) and shares one of the query's words
    full = full_match_score({"weekday": 0, "rehab": 3}, 300)
    fused = relative_fusion([(7, 0.5 * full)], {1: 0.9, 2: 0.8}, spread=0.05, full_match=full)
    assert fused[7] == pytest.approx(0.8 + 0.05 * 0.5)
    assert best(fused) == [1, 7, 2]


def test_with_no_distribution_yet_words_decide():
    # one vector in the index: its spread is 0, the word scores still order the rest
    fused = relative_fusion([(5, 2.0), (6, 1.0)], {9: 0.94}, spread=0.0, full_match=2.0)
    assert best(fused) == [5, 6, 9]


@pytest.mark.parametrize(
    ("doc_freqs", "total"),
    [({}, 0), ({"x": 0}, 0), ({"x": 5}, 3), ({"a": 100, "b": 100}, 100)],
)
def test_full_match_score_is_positive_and_finite_on_degenerate_counts(doc_freqs, total):
    score = full_match_score(doc_freqs, total)
    assert score >= 0 and score < 1e3
    fused = relative_fusion([(1, 1.0)], {}, spread=0.01, full_match=score)
    assert all(v == v for v in fused.values())  # no NaN


def test_the_heldout_set_is_large_split_in_halves_and_shares_no_content_word():
    halves = heldout()
    pairs = [p for half in halves.values() for p in half]
    assert len(pairs) >= 150
    assert min(len(h) for h in halves.values()) >= 75
    assert not {f for f, _ in halves["tune"]} & {f for f, _ in halves["test"]}
    assert not {f for f, _ in pairs} & {f for f, _ in PARAPHRASE}  # written apart
    assert [(f, q) for f, q in pairs if shared_words(f, q)] == []


def test_the_split_follows_the_fact_digest_so_no_pair_can_be_moved():
    rows = json.loads(HELDOUT.read_text(encoding="utf-8"))["pairs"]
    for topic in {r["topic"] for r in rows}:
        ordered = sorted(
            (r for r in rows if r["topic"] == topic),
            key=lambda r: hashlib.sha256(r["fact"].encode()).hexdigest(),
        )
        assert [r["half"] for r in ordered] == [
            "tune" if i % 2 == 0 else "test" for i in range(len(ordered))
        ]
