"""Telegram channel under stress: streaming rate limit, flood control, network
errors, bad or missing tokens. Real HTTP to a fake Bot API."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from agents.testing import ScriptedModel, assistant_message

from conftest import PROJECT_ROOT, ext_code
from support.fake_telegram import Failure, FakeTelegram
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.telegram_support import (
    ALICE,
    EXTENSION_ID,
    install_extension,
    slow_stream,
    write_settings,
)


@pytest.fixture
def tg(monkeypatch):
    with FakeTelegram() as server:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", server.token)
        yield server


@pytest.fixture(autouse=True)
def _extension(ext_root):
    install_extension(ext_root)


async def test_streaming_edits_one_message_at_most_once_per_second(tg, settings_file):
    parts = [f"word{i} " for i in range(30)]  # 30 chunks over ~3 s
    model = ScriptedModel([slow_stream(parts, 0.1)])
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("stream please", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["".join(parts).strip()], timeout=15)
    (message,) = tg.messages(ALICE)
    assert 2 <= len(message.edits) <= 4  # previews every second, then the final text
    writes = [c.at for c in tg.calls if c.method in ("sendMessage", "editMessageText")]
    gaps = [b - a for a, b in itertools.pairwise(writes)]
    assert min(gaps) >= 0.95, gaps
    assert len(set(message.edits)) == len(message.edits)  # never the same text twice
    assert tg.calls_of("sendChatAction")  # "typing…" while the model starts


async def test_replies_ready_within_the_edit_interval_are_sent_once_without_waiting(
    tg, settings_file
):
    """A reply that streams in faster than ``edit_interval_s`` is one ``sendMessage``:
    no preview to edit, so no turn waits out the interval while it holds its
    conversation (a backlog drained at under one message a second, issue 41)."""
    texts = [f"m{i}" for i in range(4)]
    model = ScriptedModel([slow_stream(["echo: ", text], 0.01) for text in texts])
    settings = write_settings(settings_file, tg, edit_interval_s=3.0)
    async with running_kernel(settings, model=model):
        for text in texts:
            tg.send_update(text, user_id=ALICE)
        want = [f"echo: {text}" for text in texts]
        await wait_for(lambda: tg.chat_texts(ALICE) == want, timeout=60)
    assert [m.edits for m in tg.messages(ALICE)] == [[] for _ in texts]
    assert len(tg.calls_of("sendMessage")) == len(texts)
    assert not tg.calls_of("editMessageText")


async def test_retry_after_is_honoured(tg, settings_file):
    tg.fail_next("sendMessage", Failure(429, "Too Many Requests: retry after 1", retry_after=1))
    model = ScriptedModel([[assistant_message("patience")]])
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("hi", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["patience"])
    refused, accepted = tg.calls_of("sendMessage")
    assert accepted.at - refused.at >= 1.0
    assert len(tg.messages(ALICE)) == 1


async def test_network_errors_while_polling_are_retried(tg, settings_file):
    bad_gateway = Failure(502, "Bad Gateway", retry_after=None)
    tg.fail_next("getUpdates", bad_gateway, bad_gateway)
    model = ScriptedModel([[assistant_message("still here")]])
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("are you there?", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["still here"], timeout=15)
    polls = tg.calls_of("getUpdates")
    assert polls[2].at - polls[1].at >= 1.5  # backoff doubles: 1 s, then 2 s


async def test_invalid_token_marks_the_extension_error_and_the_kernel_runs_on(
    tg, settings_file, make_ext, monkeypatch
):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "999:wrong")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(write_settings(settings_file, tg)) as kernel:
        record = kernel.loader.records[EXTENSION_ID]
        assert record.status.value == "error"
        assert "rejected TELEGRAM_BOT_TOKEN" in (record.error or "")
        assert "999:wrong" not in (record.error or "")
        assert kernel.loader.records["capture"].status.value == "active"
        await kernel.loader.instance("capture").say("/status")
        await wait_for(lambda: kernel.loader.instance("capture").sent)
    assert tg.calls_of("getUpdates") == []


def test_missing_token_skips_telegram_and_the_kernel_runs_without_it(
    ext_root, make_ext, settings_file, monkeypatch
):
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    make_ext("other", ext_code())
    path = settings_file()
    result = subprocess.run(
        [sys.executable, "main.py", "extensions", "--json", "--settings", str(path)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = {r["id"]: r for r in json.loads(result.stdout)}
    assert report[EXTENSION_ID]["status"] == "skipped"
    assert "missing secret TELEGRAM_BOT_TOKEN" in report[EXTENSION_ID]["error"]
    assert report["other"]["status"] == "active"
    assert "ERROR" not in result.stderr, result.stderr  # the user's setup, not a failure
