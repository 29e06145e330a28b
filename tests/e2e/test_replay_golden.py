"""Golden conversations (tests/golden/*.jsonl) replayed with the current code:
each trace was recorded once through a real kernel and the fake model server
and exported with ``main.py replay --export``; replaying it needs no journal
and no model. A change that alters what the kernel or the hooks decide in
these conversations shows up here as a divergence.

To record them again (after a deliberate change to the orchestrator's prompt,
say): ``HEARTH_RECORD_GOLDEN=1 .venv/bin/pytest tests/e2e/test_replay_golden.py``.
"""

from __future__ import annotations

import os

import pytest

from core.cli.replay_driver import replay_trace
from core.config import load_settings
from core.replay.trace import read_trace, write_trace
from support.fake_openai import FakeOpenAIServer
from support.replay_kit import (
    GOLDEN_DIR,
    GOLDEN_SETTINGS,
    REPLAY_MODELS,
    model_settings,
    record_conversation,
    record_streamed_conversation,
    recorded,
    write_extensions,
    write_streaming_extensions,
)

APPROVAL = GOLDEN_DIR / "approval_hook_postprocess.jsonl"
STREAMED = GOLDEN_DIR / "streamed_shaping.jsonl"


async def test_golden_approval_hook_postprocess_replays(make_ext, settings_file):
    write_extensions(make_ext)
    settings = load_settings(
        settings_file(models=REPLAY_MODELS, policy={"profile": "safe"}, **GOLDEN_SETTINGS)
    )
    trace = read_trace(APPROVAL)
    assert len(trace.turns) == 2

    report = await replay_trace(trace, settings)

    assert report.identical, report.divergence and report.divergence.diff


async def test_golden_streamed_shaping_replays(make_ext, settings_file):
    write_streaming_extensions(make_ext)
    settings = load_settings(settings_file(models=REPLAY_MODELS, **GOLDEN_SETTINGS))
    trace = read_trace(STREAMED)
    assert any(f.payload.get("streamed") for t in trace.turns for f in t.frames)

    report = await replay_trace(trace, settings)

    assert report.identical, report.divergence and report.divergence.diff


@pytest.mark.skipif(
    os.environ.get("HEARTH_RECORD_GOLDEN") != "1", reason="records the golden traces anew"
)
async def test_record_golden_traces(make_ext, settings_file, ext_root, tmp_path):
    with FakeOpenAIServer() as srv:
        write_extensions(make_ext)
        path = settings_file(
            models=model_settings(srv), policy={"profile": "safe"}, **GOLDEN_SETTINGS
        )
        settings, _ = await record_conversation(srv, path)
        write_trace(await recorded(settings), APPROVAL)
    for ext_dir in ext_root.iterdir():
        for file in ext_dir.iterdir():
            file.unlink()
        ext_dir.rmdir()
    for file in (tmp_path / "data").glob("*"):
        if file.is_file():
            file.unlink()
    with FakeOpenAIServer() as srv:
        write_streaming_extensions(make_ext)
        path = settings_file(models=model_settings(srv), **GOLDEN_SETTINGS)
        settings = await record_streamed_conversation(srv, path)
        write_trace(await recorded(settings, "stream:u1"), STREAMED)
