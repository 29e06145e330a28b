"""Post-processor metadata and the registry (issue 46): ``/ext info``, ``/ext set``
kept across restarts, ``postprocess.disabled``, display order and built-in marks,
declared params and output schemas enforced, a trailing ``#name`` that is none of
the person's told, and activations that follow the person across channels."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from test_postprocess_runner import Sink

from core.config import PostProcessSettings, StorageSettings
from core.extensions.contract import PostProcessResult, TurnContext
from core.kernel.postprocess import PostProcessing
from support.postprocessors import wired_processors

ANA_CLI = TurnContext(
    channel_id="cli", user_id="local", session_id="s1", turn_id="1@1.0", person="ana"
)
ANA_TELEGRAM = TurnContext(
    channel_id="telegram", user_id="111", session_id="s2", turn_id="2@1.0", person="ana"
)
BEN = TurnContext(
    channel_id="telegram",
    user_id="222",
    session_id="s3",
    turn_id="3@1.0",
    person="ben",
    role="member",
)


class Reporter:
    """A custom processor with metadata; ``content`` is what it returns."""

    name = "report"
    output_target = "silent"
    display_name = "Report"
    category = "Export"
    display_order = 5
    keywords = ("pdf",)
    parameters = {"supported": True, "allowed_values": ["short", "long"], "examples": ["short"]}
    output_schema = {"type": "object", "required": ["title"]}

    def __init__(self, content: Any) -> None:
        self.content = content
        self.seen: list[str | None] = []

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        return True, None

    async def execute(self, context: Any, param: str | None) -> PostProcessResult:
        self.seen.append(param)
        return PostProcessResult(self.name, self.content)


class BadCategory(Reporter):
    name = "oddity"
    category = "Poetry"


@pytest.fixture
async def started(
    tmp_path: Path, storage_backend: dict[str, str]
) -> AsyncIterator[Callable[..., Awaitable[tuple[PostProcessing, dict]]]]:
    """``await started(*processors, **settings)``: post-processing as a new kernel
    process opens it, on ``sessions.db`` or on PostgreSQL."""
    opened: list[PostProcessing] = []
    storage = StorageSettings.model_validate(storage_backend)

    async def start(*extra: Any, **settings: Any) -> tuple[PostProcessing, dict]:
        post = PostProcessing.build(
            tmp_path / "sessions.db",
            Sink(),
            wired_processors(*extra),
            settings=PostProcessSettings(**settings),
            storage=storage,
        )
        await post.open()
        opened.append(post)
        return post, {c.name: c.handler for c in post.commands()}

    yield start
    for post in opened:
        await post.aclose()


async def test_info_shows_the_metadata_and_the_listing_orders_and_marks(started):
    post, cmd = await started(Reporter({"title": "t"}), BadCategory({}))
    info = await cmd["ext"]("info json", ANA_CLI)
    assert info.splitlines()[0] == "JSON Output (#json) v1.0.0 — Transform, built-in"
    assert "Param: minimal, full — how much of the turn to include" in info
    assert "Examples: #json:minimal, #json:full" in info
    assert "Your #json: default param none" in info
    assert "Param: none" in await cmd["ext"]("info classify", ANA_CLI)
    assert (await cmd["ext"]("info report", ANA_CLI)).startswith(
        "Report (#report) — Export, from the extension fixture"
    )
    assert [e.name for e in post.catalog.entries()] == [
        "report",
        "json",
        "decision",
        "extract",
        "classify",
    ]  # display_order first; "oddity" left out for its category
    listing = await cmd["ext"]("", ANA_CLI)
    assert "  report [Export, from fixture] — " in listing


async def test_set_changes_the_default_param_checked_and_kept_across_restarts(started):
    _, cmd = await started()
    assert await cmd["ext"]("set json huge", ANA_CLI) == (
        "json does not take 'huge': 'huge' is not one of minimal, full"
    )
    assert await cmd["ext"]("set classify x", ANA_CLI) == (
        "classify does not take 'x': #classify takes no param (got 'x')"
    )
    assert await cmd["ext"]("set ghost x", ANA_CLI) == (
        "You have no #ghost; /ext lists your activations."
    )
    assert await cmd["ext"]("set json minimal", ANA_CLI) == (
        "#json runs with minimal by default now."
    )

    restarted, again = await started()
    query = await restarted.parse("Is it up? #json", ANA_CLI)
    outcome = await restarted.finish(query, "It is up.", "answered", None, ANA_CLI)
    assert outcome is not None and outcome.record is not None
    assert outcome.record.results[0].content == {"query": "Is it up?", "answer": "It is up."}
    assert await again["ext"]("set json", ANA_CLI) == "#json has no default param now."


async def test_disabled_processors_are_not_offered(started):
    post, cmd = await started(disabled=("extract",))
    assert post.catalog.get("extract") is None
    listing = await cmd["ext"]("", ANA_CLI)
    assert "#extract → extract (not available now)" in listing
    assert "extract [" not in listing


async def test_declared_params_and_output_schema_are_enforced_on_a_run(started):
    good, bad = Reporter({"title": "Q3"}), Reporter({"pages": 3})
    post, cmd = await started(good)
    await cmd["ext"]("activate report", ANA_CLI)
    query = await post.parse("Sum it up #report:medium #json:minimal", ANA_CLI)
    outcome = await post.finish(query, "Fine.", "answered", None, ANA_CLI)
    assert outcome is not None and outcome.record is not None
    refused, ran = outcome.record.results
    assert (refused.success, refused.error) == (False, "'medium' is not one of short, long")
    assert good.seen == [] and ran.success  # refused before the processor saw it

    post2, cmd2 = await started(bad)
    await cmd2["ext"]("activate report", BEN)
    query = await post2.parse("Sum it up #report:short", BEN)
    outcome = await post2.finish(query, "Fine.", "answered", None, BEN)
    assert outcome is not None and outcome.record is not None
    failed = outcome.record.results[0]
    assert failed.success is False
    assert failed.error == (
        "output does not match the declared schema at content: 'title' is a required property"
    )


async def test_a_trailing_name_that_is_not_the_persons_is_told(started):
    post, cmd = await started()
    await cmd["ext"]("deactivate decision", ANA_CLI)
    query = await post.parse("Ship it #decision #nosuch", ANA_CLI)
    assert query.clean == "Ship it #decision #nosuch" and query.specs == ()
    outcome = await post.finish(query, "Shipped.", "answered", None, ANA_CLI)
    assert outcome is not None and outcome.record is None
    assert outcome.followup == (
        "▸ #decision is not activated for you: /ext activate decision\n"
        "▸ #nosuch is not one of your post-processors, so nothing ran for it "
        "(it stayed in the message); /ext lists yours"
    )
    mid = await post.parse("C# and #hashtags in the middle stay quiet, fine", ANA_CLI)
    assert await post.finish(mid, "ok", "answered", None, ANA_CLI) is None


async def test_activations_follow_the_person_across_channels(started):
    post, cmd = await started()
    # made on Telegram ...
    assert await cmd["ext"]("activate decision binary", ANA_TELEGRAM) == (
        "Activated #decision2 (decision, default param binary)."
    )
    await cmd["ext"]("rename decision2 yesno", ANA_TELEGRAM)
    # ... applies on the CLI, and in the names the channels complete for Ana
    query = await post.parse("Is it down? #yesno", ANA_CLI)
    assert [s.name for s in query.specs] == ["yesno"]
    post.resolve = lambda turn: TurnContext(
        channel_id=turn.channel_id, user_id=turn.user_id, person="ana"
    )
    assert "yesno" in [n for n, _ in await post.activated_names("cli", "local")]
    # Ben (a member) has his own
    assert "yesno" not in [a.name for a in await post.activations.of("person:ben")]


async def test_a_persons_first_read_adopts_the_conversations_activations(started):
    post, _ = await started()
    legacy = "cli:local"
    await post.activations.activate(legacy, "json", "full")  # as kept before issue 46
    adopted = await post.activations.of("person:ana", legacy)
    assert [(a.name, a.default_param) for a in adopted][-1] == ("json2", "full")
    await post.activations.deactivate("person:ana", "json2")
    again = await post.activations.of("person:ana", "telegram:111")  # no second adoption
    assert "json2" not in [a.name for a in again]


class OwnJson(Reporter):
    """Another extension's #json."""

    name = "json"
    display_order = 100


async def test_a_bundled_name_is_replaced_only_with_the_users_consent(tmp_path):
    from core.extensions.loading.names import NamePolicy
    from support.postprocessors import Provider, provider_record

    replaces: dict[str, dict[str, str]] = {}
    policy = NamePolicy(
        lambda ext: {"postprocessors": 0.0, "early": 1.0}.get(ext),  # bundled, then granted
        lambda ext: replaces.get(ext, {}),
    )
    early = provider_record("early", Provider([OwnJson({"title": "mine"})]))
    records = [early, *wired_processors()()]  # "early" even loads first

    def built() -> PostProcessing:
        return PostProcessing.build(tmp_path / "sessions.db", Sink(), lambda: records, names=policy)

    kept = built().catalog.get("json")
    assert kept is not None and (kept.owner, kept.replaced) == ("postprocessors", None)

    replaces["early"] = {"#json": "postprocessors"}  # what `extensions grant` records on "yes"
    post = built()
    await post.open()
    try:
        taken = post.catalog.get("json")
        assert taken is not None and (taken.owner, taken.replaced) == ("early", "postprocessors")
        cmd = {c.name: c.handler for c in post.commands()}
        assert "  json [Export, from early, replacing postprocessors's] — " in await cmd["ext"](
            "", ANA_CLI
        )
        assert "(replacing postprocessors's, as its grant allows)" in await cmd["ext"](
            "info json", ANA_CLI
        )
    finally:
        await post.aclose()
