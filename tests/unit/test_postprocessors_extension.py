"""The bundled ``postprocessors`` extension's post-processors reproduce seed 000's
examples: same fields, same values, same branch keys for the same answers
(docs/postprocessors.md)."""

from __future__ import annotations

import json

import pytest

from core.extensions.contract import PostProcessContext, PostProcessor
from sandbox.extensions.postprocessors.classify import Classify
from sandbox.extensions.postprocessors.decision import Decision
from sandbox.extensions.postprocessors.extract import Extract
from sandbox.extensions.postprocessors.json_output import JsonOutput
from sandbox.extensions.postprocessors.main import PostProcessorsExtension


def context(
    answer: str, query: str = "What is the CPU usage?", **fields: object
) -> PostProcessContext:
    return PostProcessContext(
        answer_text=answer, original_query=f"{query} #x", clean_query=query, **fields
    )


def padded(text: str, length: int) -> str:
    """``text`` then neutral filler (no signal word, number or capital) up to ``length``."""
    filler = " the nightly report lists the tables in the warehouse"
    body = text + filler * (length // len(filler) + 1)
    return body[:length]


async def run(processor: PostProcessor, answer: str, param: str | None = None, **fields: object):
    ok, reason = processor.validate_param(param)
    assert ok, reason
    result = await processor.execute(context(answer, **fields), param)
    json.dumps(result.content)  # every built-in's content is plain JSON
    return result.content


def test_the_extension_offers_the_four_with_the_seed_targets_in_listing_order():
    offered = PostProcessorsExtension().get_post_processors()
    targets = {p.name: p.output_target for p in offered}
    assert targets == {
        "json": "chat_append",
        "decision": "silent",
        "extract": "silent",
        "classify": "silent",
    }
    assert list(targets) == ["json", "decision", "extract", "classify"]
    assert all(isinstance(p, PostProcessor) for p in offered)


# ------------------------------------------------------------ #json


async def test_json_default_is_the_seed_example():
    content = await run(
        JsonOutput(),
        "The top 5 tables are...",
        query="Show me the top 5 tables",
        session_id="sess_abc123",
        turn_id="1",
        provider="anthropic",
        model="claude-3-opus",
        answered_at="2026-02-20T15:30:45Z",
        turn_input_tokens=3250,
        turn_output_tokens=187,
        total_input_tokens=5430,
        total_output_tokens=512,
        tools_used=("base_readQuery", "TDA_FinalReport"),
    )
    # the seed's example; its table also lists profile_type (Hearth: tool_enabled,
    # no profile tag), and Hearth's turn ids are strings
    assert content == {
        "query": "Show me the top 5 tables",
        "answer": "The top 5 tables are...",
        "session_id": "sess_abc123",
        "turn_id": "1",
        "profile_tag": None,
        "profile_type": "tool_enabled",
        "provider": "anthropic",
        "model": "claude-3-opus",
        "tokens": {"input": 3250, "output": 187, "total_input": 5430, "total_output": 512},
        "tools_used": ["base_readQuery", "TDA_FinalReport"],
        "timestamp": "2026-02-20T15:30:45Z",
    }


async def test_json_minimal_and_full_field_sets():
    trace = ({"type": "tool_call", "tool": "current_time", "arguments": {}},)
    minimal = await run(JsonOutput(), "Noon.", "minimal")
    full = await run(
        JsonOutput(), "Noon.", "full", execution_trace=trace, collected_data=({"now": "12:00"},)
    )
    default = await run(JsonOutput(), "Noon.")
    assert minimal == {"query": "What is the CPU usage?", "answer": "Noon."}
    assert list(full) == [*default, "execution_trace", "collected_data"]
    assert full["execution_trace"] == [dict(trace[0])]
    assert full["collected_data"] == [{"now": "12:00"}]


# ------------------------------------------------------------ #decision

CRITICAL_ANSWER = padded(
    "The nightly load hit an outage: disk usage exceeded the limit. We recommend more space.",
    1284,
)


async def test_decision_multi_branch_is_the_seed_example():
    assert len(CRITICAL_ANSWER) == 1284
    assert await run(Decision(), CRITICAL_ANSWER) == {
        "result": "threshold_exceeded",
        "severity": "critical",
        "confidence": 0.78,
        "action_recommended": True,
        "branch_key": "threshold_exceeded_critical",
        "signal_counts": {"critical": 2, "warning": 0, "ok": 0, "action": 1},
        "reasoning": "Analyzed 1284 chars",
    }
    assert (await run(Decision(), CRITICAL_ANSWER, "critical"))["branch_key"] == (
        "threshold_exceeded_critical"
    )


async def test_decision_binary_is_the_seed_example():
    assert await run(Decision(), CRITICAL_ANSWER, "binary") == {
        "result": "yes",
        "action_recommended": True,
        "branch_key": "yes",
    }
    assert (await run(Decision(), "All services are healthy.", "binary"))["branch_key"] == "no"


@pytest.mark.parametrize(
    ("answer", "param", "branch", "confidence"),
    [
        ("Latency is elevated and the API is slow.", None, "approaching_threshold_warning", 0.74),
        ("Latency is elevated and the API is slow.", "warning", "threshold_exceeded_warning", 0.74),
        ("Everything is healthy and stable.", None, "nominal_ok", 0.74),
        ("The report has 12 rows.", None, "nominal_info", 0.5),
        (
            "One node is down, but the others are healthy.",
            None,
            "threshold_exceeded_critical",
            0.54,
        ),
    ],
)
async def test_decision_branch_keys(answer, param, branch, confidence):
    content = await run(Decision(), answer, param)
    assert (content["branch_key"], content["confidence"]) == (branch, confidence)


def test_decision_rejects_an_unknown_mode():
    ok, reason = Decision().validate_param("maybe")
    assert not ok and "binary, critical or warning" in (reason or "")


# ------------------------------------------------------------ #extract

STATUS_ANSWER = padded(
    "Status of DW_PROD and DW_DEV:\n- CPU: 94%\n- Memory: 87.5 GB (87.5% of capacity)\n",
    2847,
)


async def test_extract_full_is_the_seed_example():
    assert await run(Extract(), STATUS_ANSWER) == {
        "numbers": [
            {"label": "CPU", "value": 94, "unit": "%"},
            {"label": "Memory", "value": 87.5, "unit": "GB"},
        ],
        "percentages": [94.0, 87.5],
        "entities": ["DW_PROD", "DW_DEV"],
        "source_length": 2847,
    }


async def test_extract_the_seed_pattern_examples_and_one_kind():
    answer = (
        "Active Connections: 1,234\nLoad is 87.5% then 92.1%. See CUSTOMER_TABLE and SYS.ADMIN."
    )
    content = await run(Extract(), answer)
    assert content["numbers"] == [{"label": "Active Connections", "value": 1234, "unit": ""}]
    assert content["percentages"] == [87.5, 92.1]
    assert content["entities"] == ["CUSTOMER_TABLE", "SYS.ADMIN"]
    assert await run(Extract(), answer, "percentages") == {
        "percentages": [87.5, 92.1],
        "source_length": len(answer),
    }
    assert not Extract().validate_param("dates")[0]


# ------------------------------------------------------------ #classify


async def test_classify_is_the_seed_example():
    answer = "CPU is at 94% and memory pressure is high; disk latency grew. One error was logged."
    assert await run(Classify(), answer) == {
        "primary_category": "performance",
        "confidence": 0.82,
        "all_categories": {"performance": 4, "alert": 1},
        "branch_key": "performance",
        "query": "What is the CPU usage?",
    }


async def test_classify_falls_back_to_informational_at_one_half():
    content = await run(Classify(), "Hello! Nice to meet you.", query="hi")
    assert content == {
        "primary_category": "informational",
        "confidence": 0.5,
        "all_categories": {},
        "branch_key": "informational",
        "query": "hi",
    }
    assert not Classify().validate_param("strict")[0]
