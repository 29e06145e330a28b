"""The bundled memory extension through a real kernel and a scripted model:
ranking among 1,000 facts, dedupe, forget, the context provider's budget,
and hybrid ranking against a fake embeddings endpoint."""

from __future__ import annotations

import random
import re

from agents.testing import ScriptedModel, assistant_message, function_call

from support.bundled import tool_output
from support.fake_embeddings import FakeEmbeddingServer
from support.harness import running_kernel, wait_for
from support.memory_kit import TURN, converse, replies

NAMES = "Anna Maria Tom Ines Paulo Sofia Jonas Lea Omar Yuki".split()
RELATIONS = "sister brother cousin friend colleague neighbour aunt uncle".split()
CITIES = "Lisbon Porto Berlin Paris Madrid Rome Vienna Oslo".split()
THINGS = "tennis jazz sushi chess hiking opera gardening cycling".split()


def distractors(n: int, seed: int = 1) -> list[str]:
    """Facts that share words with the target but never all of them."""
    rng = random.Random(seed)
    facts: list[str] = []
    while len(facts) < n:
        rel, name = rng.choice(RELATIONS), rng.choice(NAMES)
        fact = rng.choice(
            (
                f"The user's {rel} {name} lives in {rng.choice(CITIES)}.",
                f"{name} likes {rng.choice(THINGS)} and visits {rng.choice(CITIES)} often.",
                f"The user's {rel} works with {name} on {rng.choice(THINGS)} projects.",
                f"{name}, the user's {rel}, has a birthday in month {rng.randint(1, 12)}.",
            )
        )
        if not ("sister" in fact and "Anna" in fact and "lives" in fact):
            facts.append(f"{fact} (note {len(facts)})")
    return facts


async def bulk(kernel, facts: list[str]) -> None:
    await kernel.loader.instance("memory").store.insert_many(
        (text, "import", 1_700_000_000.0 + i) for i, text in enumerate(facts)
    )


async def test_recall_ranks_the_relevant_fact_first_among_1000(memory_settings):
    target = "The user's sister Anna lives in Lisbon."
    model = ScriptedModel(
        [
            [function_call("remember", {"text": target}, call_id="r1")],
            [function_call("recall", {"query": "Where does my sister Anna live?"}, call_id="q1")],
            [assistant_message("Lisbon.")],
        ]
    )
    async with running_kernel(memory_settings(), model=model) as kernel:
        await bulk(kernel, distractors(999))
        await converse(kernel, "Remember where Anna lives, then tell me")
        assert await kernel.loader.instance("memory").store.count() == 1000
    assert tool_output(model, "r1") == f"remembered #1000: {target}"
    lines = tool_output(model, "q1").splitlines()
    assert len(lines) == 5
    assert re.fullmatch(
        r"#1000 \(score \d+\.\d{3}, source capture:u1, created \d{4}-\d\d-\d\d \d\d:\d\d UTC\): "
        + re.escape(target),
        lines[0],
    )
    scores = [float(re.search(r"score (\d+\.\d+)", line).group(1)) for line in lines]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]
    model.assert_complete()


async def test_near_identical_facts_are_stored_once_and_refreshed(memory_settings):
    tea = "The user drinks Earl Grey tea with a slice of lemon every morning before work."
    model = ScriptedModel(
        [
            [function_call("remember", {"text": tea}, call_id="r1")],
            [
                function_call(
                    "remember", {"text": "The user drinks green tea at night."}, call_id="r2"
                )
            ],
            [function_call("remember", {"text": tea.upper().replace(",", "")}, call_id="r3")],
            [
                function_call(
                    "remember", {"text": tea.replace("every", "every single")}, call_id="r4"
                )
            ],
            [function_call("list_memories", {"limit": 10, "offset": 0}, call_id="l1")],
            [function_call("remember", {"text": "  "}, call_id="r5")],
            [function_call("remember", {"text": "x" * 2001}, call_id="r6")],
            [assistant_message("Noted.")],
        ]
    )
    async with running_kernel(memory_settings(), model=model) as kernel:
        await converse(kernel, "I like Earl Grey in the morning and green tea at night")
        memory = kernel.loader.instance("memory")
        assert await memory.store.count() == 2
        first = await memory.store.get(1)
        assert first.updated_at > first.created_at
    assert tool_output(model, "r1") == f"remembered #1: {tea}"
    assert tool_output(model, "r3") == f"already remembered as #1 (refreshed): {tea}"
    assert tool_output(model, "r4") == f"already remembered as #1 (refreshed): {tea}"
    listing = tool_output(model, "l1").splitlines()
    assert listing[0] == "2 of 2 memories, newest first"
    assert listing[1].startswith("#1 (source capture:u1, created ")
    assert listing[2].startswith("#2 ")
    assert tool_output(model, "r5") == "error: the fact is empty"
    assert tool_output(model, "r6") == (
        "error: fact too long: 2001 characters > limit 2000 (config memory.max_fact_chars); "
        "store shorter, separate facts"
    )


async def test_forget_removes_a_fact_from_recall(memory_settings):
    model = ScriptedModel(
        [
            [function_call("remember", {"text": "The user's locker code is 4711."}, call_id="r1")],
            [function_call("forget", {"memory_id": 1}, call_id="f1")],
            [function_call("forget", {"memory_id": 1}, call_id="f2")],
            [function_call("recall", {"query": "locker code", "limit": 5}, call_id="q1")],
            [function_call("list_memories", {"limit": 20, "offset": 0}, call_id="l1")],
            [assistant_message("Forgotten.")],
        ]
    )
    async with running_kernel(memory_settings(), model=model) as kernel:
        await converse(kernel, "forget my locker code")
    assert tool_output(model, "f1") == "forgot #1: The user's locker code is 4711."
    assert tool_output(model, "f2") == "error: no memory with id 1"
    assert tool_output(model, "q1") == "no memories match 'locker code'"
    assert tool_output(model, "l1") == "no memories stored yet"


async def test_memories_command_counts_them_with_no_model(memory_settings):
    async with running_kernel(memory_settings()) as kernel:
        await converse(kernel, "/memories")
        await bulk(kernel, ["Tea, no sugar.", "Lives in Porto."])
        await converse(kernel, "/memories", 2)
    assert replies(kernel)[0][2] == "0 memories kept"
    assert replies(kernel)[1][2] == "2 memories kept\n#2: Lives in Porto.\n#1: Tea, no sugar."


def memory_block(instructions: str) -> str:
    start = instructions.index("[Relevant memories]")
    end = instructions.find("\n---\n", start)
    return instructions[start : end if end >= 0 else None]


async def test_context_provider_stays_within_budget_and_reaches_the_turn_note(
    memory_settings,
):
    path = memory_settings(max_context_chars=300, max_context_items=4)
    model = ScriptedModel([[assistant_message("Try the oolong.")]])
    facts = [
        f"Tea note {i}: the user enjoyed a cup of oolong tea brewed at {80 + i % 15} degrees "
        f"for {2 + i % 4} minutes with friends from the chess club."
        for i in range(200)
    ]
    async with running_kernel(path, model=model) as kernel:
        await bulk(kernel, [*facts, "The user's cat is called Miso."])
        await converse(kernel, "Which oolong tea should I brew tonight?")
        memory = kernel.loader.instance("memory")
        assert await memory.get_context("thanks, bye!", TURN) is None
        assert await memory.get_context("quantum chromodynamics", TURN) is None
        cat = await memory.get_context("What is my cat called?", TURN)
        for prompt in ("oolong", "tea with friends", "chess club degrees minutes", "cup"):
            block = await memory.get_context(prompt, TURN)
            assert block is not None and len(block) <= 300
    assert cat == "[Relevant memories]\n- The user's cat is called Miso."
    call = model.calls[0]
    assert "Tea note" not in call.system_instructions  # the stable prefix stays as it was
    note, asked = call.input[-2], call.input[-1]
    assert note["role"] == "system"  # the turn's note, just before the user's message
    block = memory_block(note["content"])
    assert len(block) <= 300
    lines = block.splitlines()
    assert lines[0] == "[Relevant memories]" and 1 <= len(lines) - 1 <= 4
    assert all(line.startswith("- Tea note ") for line in lines[1:])
    assert "Tea note" not in str(asked)  # the user's text is not rewritten


async def test_a_fact_longer_than_the_budget_is_shortened(memory_settings):
    async with running_kernel(memory_settings(max_context_chars=80)) as kernel:
        memory = kernel.loader.instance("memory")
        await memory.remember_fact("The user's garden has " + "many tall sunflowers " * 10)
        block = await memory.get_context("sunflowers in the garden", TURN)
    assert block is not None and len(block) == 80 and block.endswith("…")


async def test_the_embedding_client_is_a_shared_service(memory_settings):
    """One client per endpoint, model and credential, closed by the kernel at stop;
    the credential appears in the key (which is logged) only as a fingerprint."""
    with FakeEmbeddingServer() as srv:
        path = memory_settings(
            embeddings={"base_url": srv.base_url, "model": "fake-embed", "api_key": "sk-test"}
        )
        async with running_kernel(path) as kernel:
            assert kernel.services.shared.keys() == []  # created on first use, not at start
            memory = kernel.loader.instance("memory")
            await memory.remember_fact("The user's bike is blue.")
            (key,) = kernel.services.shared.keys()
            client = await kernel.services.shared.get_or_create(key, object)
            assert client is memory.semantic._embedder
            assert key.startswith(f"memory:embeddings:{srv.base_url}|fake-embed|")
            assert "sk-test" not in key
        assert client._http.is_closed


async def test_hybrid_ranking_with_embeddings_finds_synonyms(memory_settings):
    with FakeEmbeddingServer() as srv:
        path = memory_settings(
            embeddings={"base_url": srv.base_url, "model": "fake-embed", "api_key": "sk-test"}
        )
        model = ScriptedModel(
            [
                [
                    function_call(
                        "remember", {"text": "The user drives a red automobile."}, call_id="r1"
                    )
                ],
                [function_call("recall", {"query": "Which car do I have?"}, call_id="q1")],
                [assistant_message("A red one.")],
            ]
        )
        async with running_kernel(path, model=model) as kernel:
            memory = kernel.loader.instance("memory")
            await bulk(kernel, distractors(50))
            memory.semantic.wake()  # as an import does
            await wait_for(lambda: len(memory.semantic.index) == 50)  # backfilled
            srv.requests.clear()
            await converse(kernel, "what car do I have?")
            # the endpoint fails: writes and recall fall back to full-text search
            srv.fail = True
            await memory.remember_fact("The user's puppy is called Rex.")
            assert [m.text for m in await memory.recall("puppy Rex")] == [
                "The user's puppy is called Rex."
            ]
            srv.fail = False
        # vectors are durable: after a restart the synonym is still found; the fact
        # stored while the endpoint failed is embedded in the background
        async with running_kernel(path) as kernel:
            await wait_for(lambda: len(kernel.loader.instance("memory").semantic.index) == 52)
            found = await kernel.loader.instance("memory").recall("my vehicle")
            context = await kernel.loader.instance("memory").get_context("my vehicle", TURN)
    assert tool_output(model, "q1").splitlines()[0].endswith(": The user drives a red automobile.")
    assert found[0].text == "The user drives a red automobile."
    # no absolute cosine floor (ADR 0060): the synonym leads the context, nearest first
    assert context.startswith("[Relevant memories]\n- The user drives a red automobile.\n- ")
    # the context provider embedded the user's message first, then remember embedded the fact
    assert [r["body"]["input"] for r in srv.requests[:2]] == [
        ["what car do I have?"],
        ["The user drives a red automobile."],
    ]
    write = srv.requests[1]
    assert write["body"] == {
        "model": "fake-embed",
        "input": ["The user drives a red automobile."],
        "encoding_format": "float",
    }
    assert write["headers"]["Authorization"] == "Bearer sk-test"


async def test_bad_config_marks_memory_error_naming_the_key(memory_settings):
    async with running_kernel(memory_settings(max_context_chars="big")) as kernel:
        record = kernel.loader.records["memory"]
    assert record.status.value == "error"
    assert "max_context_chars" in (record.error or "")
