"""``/ext`` and ``/last`` with no model: activations per user with auto-naming and
default params, kept in sessions.db across restarts (SPEC §10, seed 000)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from test_postprocess_runner import Sink

from core.config import StorageSettings
from core.extensions.contract import TurnContext
from core.kernel.postprocess import PostProcessing
from support.postprocessors import wired_processors

ANA = TurnContext(channel_id="cli", user_id="ana", session_id="cli:ana", turn_id="1@1.0")
BEN = TurnContext(channel_id="cli", user_id="ben", session_id="cli:ben", turn_id="2@1.0")


@pytest.fixture
async def started(
    tmp_path: Path, storage_backend: dict[str, str]
) -> AsyncIterator[Callable[[], Awaitable[tuple[PostProcessing, dict]]]]:
    """``await started()``: post-processing as a (new) kernel process opens it, on
    ``sessions.db`` or on PostgreSQL; every one is closed after the test."""
    storage = StorageSettings.model_validate(storage_backend)
    opened: list[PostProcessing] = []

    async def start() -> tuple[PostProcessing, dict]:
        post = PostProcessing.build(
            tmp_path / "sessions.db", Sink(), wired_processors(), storage=storage
        )
        await post.open()
        opened.append(post)
        return post, {c.name: c.handler for c in post.commands()}

    yield start
    for post in opened:
        await post.aclose()


async def names(post: PostProcessing, turn: TurnContext) -> list[tuple[str, str, str | None]]:
    found = await post.activations.of(f"{turn.channel_id}:{turn.user_id}")
    return [(a.name, a.processor, a.default_param) for a in found]


async def test_built_ins_are_activated_for_everyone_and_listed(started, tmp_path):
    post, cmd = await started()
    listing = await cmd["ext"]("", ANA)
    for line in ("#json → json (chat_append)", "#decision → decision (silent)", "#classify"):
        assert line in listing
    assert "extract [Transform, built-in] — numbers, percentages and entity names" in listing
    assert [n for n, _, _ in await names(post, BEN)] == ["json", "decision", "extract", "classify"]


async def test_activate_rename_deactivate_and_they_survive_a_restart(started, tmp_path):
    post, cmd = await started()
    assert await cmd["ext"]("activate json full", ANA) == (
        "Activated #json2 (json, default param full)."
    )
    assert await cmd["ext"]("activate decision critical", ANA) == (
        "Activated #decision2 (decision, default param critical)."
    )
    assert await cmd["ext"]("rename decision2 alertcheck", ANA) == (
        "Renamed #decision2 to #alertcheck."
    )
    assert await cmd["ext"]("deactivate classify", ANA) == "Deactivated #classify."
    expected = [
        ("json", "json", None),
        ("decision", "decision", None),
        ("extract", "extract", None),
        ("json2", "json", "full"),
        ("alertcheck", "decision", "critical"),
    ]
    assert await names(post, ANA) == expected
    assert len(await names(post, BEN)) == 4  # another user's are their own

    restarted, _ = await started()  # a new process on the same sessions.db
    assert await names(restarted, ANA) == expected  # classify stays deactivated

    query = await restarted.parse("Disk? #json2 #alertcheck:binary #classify", ANA)
    assert query.clean == "Disk? #classify"  # no longer activated: stays text
    outcome = await restarted.finish(query, "Disk is fine.", "answered", None, ANA)
    assert outcome is not None
    ran = [(r.name, r.metadata["processor"], r.metadata["param"]) for r in outcome.record.results]
    assert ran == [("json2", "json", "full"), ("alertcheck", "decision", "binary")]


async def test_refusals_name_the_problem(started, tmp_path):
    _, cmd = await started()
    assert await cmd["ext"]("activate json huge", ANA) == (
        "json does not take 'huge': 'huge' is not one of minimal, full"
    )
    assert (await cmd["ext"]("activate nosuch", ANA)).startswith("No post-processor 'nosuch'.")
    assert await cmd["ext"]("rename json decision", ANA) == (
        "Cannot do that: #decision is already taken."
    )
    assert (await cmd["ext"]("rename json Bad Name", ANA)).startswith("Usage:")
    assert (await cmd["ext"]("rename json b@d", ANA)).startswith("#b@d is not a valid name")
    assert await cmd["ext"]("deactivate ghost", ANA) == (
        "Cannot do that: you have no #ghost; /ext lists your activations."
    )
    assert (await cmd["ext"]("frobnicate", ANA)).startswith("Usage: /ext")


async def test_show_prints_the_processor_source(started, tmp_path):
    _, cmd = await started()
    await cmd["ext"]("activate decision binary", ANA)
    shown = await cmd["ext"]("show decision2", ANA)
    assert shown.startswith("decision (postprocessors), ")
    assert "class Decision:" in shown and shown.endswith("```")
    assert await cmd["ext"]("show #json", ANA) == await cmd["ext"]("show json", ANA)


async def test_last_reads_results_back_after_a_restart(started, tmp_path):
    post, cmd = await started()
    assert await cmd["last"]("", ANA) == "No post-processed message yet."
    query = await post.parse("Is the disk full? #decision #json:minimal", ANA)
    outcome = await post.finish(query, "The disk is down to 2% free.", "answered", None, ANA)
    assert outcome is not None
    async with post.records.db.transaction() as tx:  # as the ledger commits it
        await outcome.record.write_to(tx)

    _, restarted = await started()
    last = await restarted["last"]("decision", ANA)
    assert last.startswith("Results for “Is the disk full? #decision #json:minimal”:\n#decision (")
    assert '"branch_key": "threshold_exceeded_critical"' in last
    every = await restarted["last"]("", ANA)
    assert "#decision (silent, ok" in every and "#json (chat_append, ok" in every
    assert await restarted["last"]("classify", ANA) == "No #classify result yet."
    assert await restarted["last"]("", BEN) == "No post-processed message yet."
