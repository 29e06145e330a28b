"""Replay (ADR 0033): a recorded conversation — tool calls, a hook modifying
arguments, a post-processor, an approval — replays identically with the current
code; a changed hook makes replay name the first divergent frame."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.cli.replay_driver import replay_trace
from support.fake_openai import FakeOpenAIServer
from support.harness import CONVERSING
from support.replay_kit import (
    SESSION,
    guard,
    model_settings,
    record_conversation,
    recorded,
    write_extensions,
)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


async def test_recorded_conversation_replays_identically(make_ext, settings_file, server):
    write_extensions(make_ext)
    path = settings_file(models=model_settings(server), policy={"profile": "safe"})
    settings, _ = await record_conversation(server, path)
    trace = await recorded(settings)
    assert [t.text for t in trace.turns] == ["is the pad clear?", "launch at mars? #json"]
    topics = [f.topic for f in trace.turns[1].frames]
    assert {"hook.tool_call", "hook.approval", "replay.model", "replay.tool"} <= set(topics)
    assert any(t.startswith("postprocess.") for t in topics)
    requests_before = len(server.requests)

    report = await replay_trace(trace, settings)

    assert report.identical, report.divergence
    assert report.turns == 2
    assert len(server.requests) == requests_before  # the model was not asked again


async def test_changed_hook_reports_the_first_divergent_frame(make_ext, settings_file, server):
    write_extensions(make_ext)
    path = settings_file(models=model_settings(server), policy={"profile": "safe"})
    settings, _ = await record_conversation(server, path)
    trace = await recorded(settings)
    make_ext("guard", guard("venus"), CONVERSING)  # the hook now sends the rocket elsewhere

    report = await replay_trace(trace, settings)

    assert not report.identical
    divergence = report.divergence
    assert divergence is not None and divergence.turn == 2
    assert divergence.expected is not None and divergence.got is not None
    assert divergence.expected["topic"] == divergence.got["topic"] == "hook.tool_call"
    assert divergence.expected["payload"]["after"] == {"target": "mars"}
    assert divergence.got["payload"]["after"] == {"target": "venus"}
    assert '"venus"' in divergence.diff
    first_turn = trace.turns[0].frames
    assert divergence.frame < len(trace.turns[1].frames) and first_turn


async def test_replay_of_one_turn_only(make_ext, settings_file, server):
    write_extensions(make_ext)
    path = settings_file(models=model_settings(server), policy={"profile": "safe"})
    settings, _ = await record_conversation(server, path)
    make_ext("guard", guard("venus"), CONVERSING)  # only turn 2 would diverge

    report = await replay_trace(await recorded(settings, SESSION), settings, upto=1)

    assert report.identical and report.turns == 1
