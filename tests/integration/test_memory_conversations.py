"""Search over past conversations (memory extension, ADR 0060), on SQLite and on
PostgreSQL: turns fed by real kernel turns and a few hundred stored ones across
several conversations, found by words and by meaning (questions that share no
word with the turn), inside a time range, never across people, and purged
with the history they index."""

from __future__ import annotations

import time

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from bench.memory_sets import CONVERSATION_PAIRS, distractors, shared_words
from core.extensions.contract import TurnContext
from sandbox.extensions.memory.conversation_search import Window, window_of
from support.bundled import copy_bundled, tool_output
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

PEOPLE = {
    "alice": {"role": "owner", "identities": ["capture:alice", "cli:local"]},
    "bob": {"role": "member", "identities": ["capture:bob"]},
}
DAY = 86400.0
PAIRS = CONVERSATION_PAIRS
BOILER, BLEED = PAIRS[0][0], PAIRS[1][0]
FILLER_REPLIES = ("Okay, noted.", "Sounds good.", "I will keep that in mind.", "Got it, thanks.")


def turn_of(who: str, conversation: int) -> TurnContext:
    person = {"alice": ("alice", "owner"), "bob": ("bob", "member")}[who]
    return TurnContext(
        channel_id="capture" if conversation == 0 else f"chat{conversation}",
        user_id=who,
        session_id=f"{who}-{conversation}",
        person=person[0],
        role=person[1],  # type: ignore[arg-type]
    )


def log(kernel) -> list[tuple[str, str | None, str]]:
    return kernel.loader.instance("capture")._log()


async def say(kernel, text: str, who: str) -> str:
    before = len(log(kernel))
    await kernel.loader.instance("capture").say(text, who)
    await wait_for(lambda: any(u == who for _, u, _ in log(kernel)[before:]), timeout=60)
    return next(m for _, u, m in log(kernel)[before:] if u == who)


async def store_history(search, now: float) -> int:
    """About 300 of Alice's turns over four conversations and 20 days (the pairs' turns
    among them), and a few of Bob's; how many turns were stored."""
    stored = 0
    filler = distractors(140, seed=11)
    for i, fact in enumerate(filler):
        when = now - DAY * (i % 20) - i
        messages = [("user", fact, when), ("assistant", FILLER_REPLIES[i % 4], when + 1)]
        await search.record(turn_of("alice", 1 + i % 4), messages)
        stored += 2
    for i, (text, role, _) in enumerate(PAIRS[2:]):
        await search.record(turn_of("alice", 1 + i % 4), [(role, text, now - DAY * (2 + i))])
        stored += 1
    await search.record(turn_of("bob", 5), [("user", "My bike has a flat tyre.", now - DAY)])
    return stored + 1


def test_the_pairs_share_no_content_word():
    assert [(t, q) for t, _, q in PAIRS if shared_words(t, q)] == []


async def test_conversations_are_searchable_by_words_and_meaning_per_person(
    ext_root, make_ext, settings_file, storage_backend
):
    copy_bundled(ext_root, "memory")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, people=PEOPLE, storage=storage_backend)
    question = PAIRS[0][2]
    model = ScriptedModel(
        [
            [assistant_message(BLEED)],
            [function_call("search_conversations", {"query": question}, call_id="s1")],
            [assistant_message("You mentioned the boiler clanking.")],
            [function_call("search_conversations", {"query": "boiler"}, call_id="b1")],
            [assistant_message("Nothing about that.")],
            [
                function_call(
                    "search_conversations",
                    {"query": "kitten", "since": "last week"},
                    call_id="bad",
                )
            ],
            [assistant_message("Which dates?")],
        ]
    )
    async with running_kernel(path, model=model) as kernel:
        memory = kernel.loader.instance("memory")
        search = memory.turns
        assert await say(kernel, BOILER, "alice") == BLEED  # a real turn, stored at its end
        total = 2 + await store_history(search, time.time())
        await wait_for(
            lambda: sum(len(ix) for ix in search.indexes.values()) == total, timeout=240
        )  # embedded in the background
        assert await say(kernel, "Remind me what I said about the heating", "alice") == (
            "You mentioned the boiler clanking."
        )
        assert await say(kernel, "What did Alice say about her boiler?", "bob") == (
            "Nothing about that."
        )
        assert await say(kernel, "Find the kitten talk", "alice") == "Which dates?"
        found = {}
        for text, _, q in PAIRS:
            hits = await search.search(q, None)
            found[q] = (
                [t.text for t in hits[:5]].index(text) + 1
                if text in [t.text for t in hits[:5]]
                else 0
            )
        by_words = await search.search("clanking boiler", None)
        alices = await say(kernel, "/search boiler", "alice")
        answer = await say(kernel, "/search radiators", "alice")
        bobs = await say(kernel, "/search boiler", "bob")
        bobs_own = await say(kernel, "/search flat tyre", "bob")
        usage = await say(kernel, "/search", "alice")
        window = await search.search(PAIRS[4][2], None, window_of_days(search, 1, 0))
        hostile = [
            await search.search(text, None)
            for text in ('"boiler" OR * NEAR(a b)', "boiler & !x | y:*", "'); DROP TABLE turns; --")
        ]
        stopwords_only = await search.search("what did I say about it", None)
        old = [("user", "Our old fridge hums loudly at night.", time.time() - 40 * DAY)]
        await search.record(turn_of("alice", 2), old)
        await wait_for(
            lambda: sum(len(ix) for ix in search.indexes.values()) == total + 7, timeout=120
        )  # three more real turns (six messages) since, and this one
        before_purge = await search.search("fridge", None)
        purged = await search.purge()
        after_purge = await search.search("fridge", None)
    # the real turn: the person's message and Hearth's answer, dated, with the conversation
    first = tool_output(model, "s1").splitlines()[0]
    assert first.endswith(f", conversation capture:alice, you: {BOILER}")
    assert answer.splitlines()[0].endswith(f"conversation capture:alice, Hearth: {BLEED}")
    # words: the turn itself, and the later answer that used the word, are both found
    assert {BOILER, "You mentioned the boiler clanking."} == {t.text for t in by_words[:2]}
    assert f"conversation capture:alice, you: {BOILER}" in alices
    # a second person finds none of the owner's turns, by tool or command
    # (Bob's own turns are his: his question about the boiler, its answer, his bike)
    for shown in (tool_output(model, "b1"), bobs, bobs_own):
        assert all(":bob, " in line for line in shown.splitlines()), shown
        assert "clanking" not in shown and "radiators" not in shown
    assert "conversation chat5:bob, you: My bike has a flat tyre." in bobs_own
    assert tool_output(model, "bad") == (
        "error: since: 'last week' is not a date (YYYY-MM-DD) or an ISO 8601 time"
    )
    assert usage.startswith("usage: /search TEXT")
    # search syntax of either backend is words to search, never syntax
    assert all(BOILER in [t.text for t in found_by[:3]] for found_by in hostile[:2])
    assert hostile[2] and stopwords_only  # meaning still ranks; the table is still there
    # meaning: questions sharing no word with the turn find it in the top 5
    assert sum(rank > 0 for rank in found.values()) >= len(PAIRS) - 2, found
    # a time range: the kitten (4 days ago) is not in the last day
    assert PAIRS[4][0] not in [t.text for t in window]
    # past the ledger's retention the turn goes, from words and from meaning
    assert before_purge and before_purge[0].text == old[0][1]
    assert purged == 1 and all(t.text != old[0][1] for t in after_purge)
    model.assert_complete()


def window_of_days(search, days_back: float, days_until: float) -> Window:
    now = time.time()
    return Window(now - days_back * DAY, now - days_until * DAY + 1)


@pytest.mark.parametrize(
    ("since", "until", "error"),
    [
        ("yesterday", None, "since: 'yesterday' is not a date (YYYY-MM-DD) or an ISO 8601 time"),
        (None, "2026-13-45", "until: '2026-13-45' is not a date (YYYY-MM-DD) or an ISO 8601 time"),
        ("2026-05-02", "2026-05-01", "since '2026-05-02' is not before until '2026-05-01'"),
    ],
)
def test_a_bad_time_range_is_refused_naming_the_value(since, until, error):
    with pytest.raises(ValueError) as caught:
        window_of(since, until)
    assert str(caught.value) == error


def test_until_a_day_includes_that_whole_day_and_times_without_zone_are_utc():
    window = window_of("2026-05-01", "2026-05-01")
    assert window.until - window.since == DAY
    assert window_of("2026-05-01T10:00", None).since == window_of("2026-05-01T10:00Z", None).since
