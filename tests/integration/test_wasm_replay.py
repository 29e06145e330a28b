"""A wasm tool granted the clock and randomness (ADR 0085): what it drew is journaled
on ``<id>.wasm.draws``, and a replay of the conversation gives the tool its recorded
answer instead of drawing again, so the replay is identical."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import grant_all
from core.cli.replay_driver import replay_trace
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.replay_kit import model_settings, recorded, say, sent
from support.wasm_guests import drawing_guest, tool_spec, write_wasm_extension

DICE = {"capabilities": ["ToolProvider"], "tools": [tool_spec("roll", "Four random letters.")]}


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


async def test_a_drawing_wasm_tool_replays_with_its_recorded_answer(
    make_ext, settings_file, ext_root, server
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    write_wasm_extension(
        ext_root, "dice", drawing_guest(DICE), {"wasm": {"clock": True, "random": True}}
    )
    assert grant_all(ext_root, ext_root.parent / "data", only="dice") == ["dice"]
    path = settings_file(models=model_settings(server))
    server.script(ToolCall("roll", {}, call_id="r1"), "Rolled.")
    async with running_kernel(path) as kernel:
        await say(kernel, "roll for me")
        await wait_for(lambda: "Rolled." in sent(kernel))
        [draws] = await kernel.bus.journal.recent_events(10, topic="dice.wasm.draws")
        assert draws.payload["call"] == "tool 'roll'"
        assert [d["kind"] for d in draws.payload["draws"]] == ["clock", "random"]
    settings = kernel.settings
    trace = await recorded(settings)

    report = await replay_trace(trace, settings)

    assert report.identical, report.divergence
