"""Parsing ``#name:param`` and running post-processors: serial, chained, and a
failure of one never touches the answer or the others (SPEC §9, seed 000)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from core.config import PostProcessSettings
from core.extensions.contract import PostProcessContext, PostProcessResult, TurnContext
from core.kernel.postprocess import PostProcessing, parse_query
from support.postprocessors import wired_processors

TURN = TurnContext(channel_id="cli", user_id="ana", session_id="cli:ana", turn_id="7@1.0")


class Sink:
    """Records what would be published on the bus."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any], str | None]] = []
        self.correlations: set[str | None] = set()

    async def publish(self, topic, source, payload, *, correlation_id=None, idempotency_key=None):
        assert source == "kernel"
        self.events.append((topic, payload, idempotency_key))
        self.correlations.add(correlation_id)
        return len(self.events)


class Processor:
    """A configurable custom post-processor."""

    output_target = "chat_append"

    def __init__(self, name: str, behaviour: str = "ok", tokens: int = 0) -> None:
        self.name = name
        self.behaviour = behaviour
        self.tokens = tokens
        self.seen: PostProcessContext | None = None

    def validate_param(self, param):
        if param == "bad":
            return False, "bad is not a mode"
        return True, None

    async def execute(self, context, param):
        self.seen = context
        if self.behaviour == "raise":
            raise RuntimeError("boom")
        if self.behaviour == "hang":
            await asyncio.sleep(30)
        if self.behaviour == "wrong":
            return {"not": "a result"}
        if self.behaviour == "unjsonable":
            return PostProcessResult(self.name, {1, 2})
        return PostProcessResult(
            self.name,
            {"param": param, "before": sorted(context.previous_results)},
            input_tokens=self.tokens,
            output_tokens=self.tokens,
            cost_usd=0.001 * self.tokens,
        )


def activated(*names: str):
    return lambda name: name in names


@pytest.mark.parametrize(
    ("text", "clean", "specs"),
    [
        (
            "What is the CPU usage? #json #decision:critical",
            "What is the CPU usage?",
            [("json", None), ("decision", "critical")],
        ),
        (
            "#json:minimal what is #foo and C# and issue#12?",
            "what is #foo and C# and issue#12?",
            [("json", "minimal")],
        ),
        (
            "Check #JSON health #json:full #extract:numbers.",
            "Check health.",
            [("json", None), ("extract", "numbers")],
        ),
        ("#json", "#json", []),  # nothing left to ask: the message stays as it is
        ("no tags here", "no tags here", []),
    ],
)
def test_parsing_takes_out_activated_names_only_in_order_once(text, clean, specs):
    query = parse_query(text, activated("json", "decision", "extract"))
    assert query.original == text
    assert query.clean == clean
    assert [(s.name, s.param) for s in query.specs] == specs


DEFAULTS = PostProcessSettings().activate_by_default


def service(
    tmp_path: Path, *extra: Processor, timeout_s: float = 5.0
) -> tuple[PostProcessing, Sink]:
    sink = Sink()
    post = PostProcessing.build(
        tmp_path / "sessions.db",
        sink,
        wired_processors(*extra),
        # the test's processors are activated for every conversation, like the bundled ones
        settings=PostProcessSettings(
            timeout_s=timeout_s,
            activate_by_default=(*DEFAULTS, *(p.name for p in extra)),
        ),
    )
    return post, sink


async def test_serial_chaining_sees_earlier_results_and_token_totals(tmp_path):
    first, second = Processor("first", tokens=100), Processor("second")
    post, sink = service(tmp_path, first, second)
    await post.open()
    query = await post.parse("How are the tables? #first:fast #second", TURN)
    outcome = await post.finish(query, "All tables are fine.", "answered", None, TURN)
    assert outcome is not None
    results = {r.name: r for r in outcome.record.results}
    assert list(results) == ["first", "second"]
    assert results["first"].content == {"param": "fast", "before": []}
    assert results["second"].content == {"param": None, "before": ["first"]}
    assert second.seen is not None and second.seen.total_input_tokens == 100
    assert second.seen.clean_query == "How are the tables?"
    assert second.seen.original_query == "How are the tables? #first:fast #second"
    assert outcome.record.usage["postprocess_input"] == 100
    assert outcome.record.usage["postprocess_cost_usd"] == pytest.approx(0.1)
    assert results["first"].metadata["execution_time_ms"] >= 0
    topics = [topic for topic, _, _ in sink.events]
    assert topics == [
        "postprocess.started",
        "postprocess.completed",
        "postprocess.started",
        "postprocess.completed",
        "postprocess.results",
    ]
    completed = sink.events[1][1]
    assert completed["name"] == "first" and completed["result"]["content"]["param"] == "fast"
    assert len({key for _, _, key in sink.events}) == 5  # one idempotency key each
    assert sink.correlations == {TURN.turn_id}


async def test_every_failure_is_contained_and_the_others_still_run(tmp_path):
    processors = [
        Processor("raises", "raise"),
        Processor("rejects"),
        Processor("hangs", "hang"),
        Processor("wrong", "wrong"),
        Processor("sets", "unjsonable"),
        Processor("fine"),
    ]
    post, _ = service(tmp_path, *processors, timeout_s=0.5)
    await post.open()
    text = "Report? #raises #rejects:bad #hangs #wrong #sets #fine #json:minimal"
    query = await post.parse(text, TURN)
    outcome = await post.finish(query, "All good.", "answered", None, TURN)
    assert outcome is not None
    errors = {r.name: r.error for r in outcome.record.results if not r.success}
    assert errors == {
        "raises": "RuntimeError: boom",
        "rejects": "bad is not a mode",
        "hangs": "took longer than 0.5 s (postprocess.timeout_s)",
        "wrong": "execute returned a dict, not a result",
        "sets": "content is not JSON: Object of type set is not JSON serializable",
    }
    ok = [r.name for r in outcome.record.results if r.success]
    assert ok == ["fine", "json"]
    assert outcome.followup is not None
    assert "▸ #raises failed: RuntimeError: boom" in outcome.followup
    assert '#json\n```json\n{\n  "query": "Report?",\n  "answer": "All good."\n}\n```' in (
        outcome.followup
    )


async def test_a_failed_turn_records_the_specs_but_runs_nothing(tmp_path):
    fine = Processor("fine")
    post, sink = service(tmp_path, fine)
    await post.open()
    query = await post.parse("Hi #fine", TURN)
    outcome = await post.finish(query, "Sorry, the model failed.", "failed", None, TURN)
    assert outcome is not None and outcome.followup is None
    assert outcome.record.results == () and [s.name for s in outcome.record.specs] == ["fine"]
    assert fine.seen is None and sink.events == []
