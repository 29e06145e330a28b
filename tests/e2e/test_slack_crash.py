"""Crash safety of the Slack channel: the kernel a real subprocess (``main.py``),
Slack and the model fake servers in this test process. SIGKILLed after the message
was journaled (and acknowledged) but before its answer, it answers once after the
restart, the redelivered envelope a no-op; killed with the answer recorded but its
``chat.postMessage`` not done, it sends the recorded answer once and never asks the
model again; killed after the send reached Slack, it sends nothing again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("slack_bolt", reason="the slack group is not installed (make install)")

from conftest import PROJECT_ROOT, ext_code, grant_all
from support.fake_openai import FakeOpenAIServer, models_section
from support.fake_slack import FakeSlack
from support.harness import conversing
from support.kernel_process import replies_marked_sent
from support.slack_support import ALICE, EXTENSION_ID, slack_settings
from support.telegram_support import install_extension


def _journal_row(db: Path, key: str) -> tuple[int, str | None] | None:
    """(event id, the router's delivery status) for an idempotency key, read-only."""
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT id FROM events WHERE idempotency_key = ?", (key,)).fetchone()
        if row is None:
            return None
        status = conn.execute(
            "SELECT status FROM deliveries WHERE event_id = ? AND subscriber_id = 'kernel.router'",
            (row[0],),
        ).fetchone()
        count = conn.execute(
            "SELECT COUNT(*) FROM events WHERE idempotency_key = ?", (key,)
        ).fetchone()
    assert count[0] == 1, f"{key} journaled {count[0]} times"
    return int(row[0]), (status[0] if status else None)


def _start_kernel(settings: Path, slack: FakeSlack, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    return subprocess.Popen(
        [sys.executable, "main.py", "--settings", str(settings)],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )


def test_sigkill_before_the_reply_is_answered_exactly_once_after_restart(
    tmp_path, ext_root, settings_file
):
    install_extension(ext_root, EXTENSION_ID)
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeSlack() as slack, FakeOpenAIServer(delay_s=30) as model:
        settings = slack_settings(settings_file, slack, models=models_section(model.base_url))
        first = _start_kernel(settings, slack, log)
        try:
            slack.wait_until(lambda: slack.connections, timeout_s=90)
            event_id = slack.dm("remember me", user=ALICE)
            model.wait_for_requests(1, timeout_s=90)  # journaled, turn under way
            slack.wait_until(lambda: slack.acked(event_id))
            assert _journal_row(db, f"slack:{event_id}") is not None
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert slack.calls_of("chat.postMessage") == []

        slack.unconfirm(event_id)  # as if the kill had beaten the acknowledgement
        model.delay_s = 0
        second = _start_kernel(settings, slack, log)
        try:
            slack.wait_until(lambda: slack.dm_texts(ALICE), timeout_s=90)
            key = f"slack:{event_id}"
            slack.wait_until(lambda: (_journal_row(db, key) or (0, ""))[1] == "done")
            slack.wait_until(lambda: slack.acked(event_id))  # the redelivery, acknowledged
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        assert slack.dm_texts(ALICE) == ["echo: remember me"], log.read_text()[-3000:]
        assert len(slack.calls_of("chat.postMessage")) == 1
        assert _journal_row(db, key) is not None  # and only once (checked inside)
        assert len(model.requests) == 2  # the killed turn, and its one re-run


def test_sigkill_between_the_recorded_answer_and_its_send_sends_it_once_after_restart(
    tmp_path, ext_root, settings_file
):
    """The answer is recorded (the outbox) and its chat.postMessage under way when the
    kernel dies; Slack never got it. After the restart the recorded answer is sent,
    once, and the model is not asked again."""
    install_extension(ext_root, EXTENSION_ID)
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeSlack() as slack, FakeOpenAIServer() as model:
        # no preview: the only chat.postMessage is the answer's own
        settings = slack_settings(
            settings_file, slack, edit_interval_s=60, models=models_section(model.base_url)
        )
        slack.hold("chat.postMessage")
        first = _start_kernel(settings, slack, log)
        try:
            slack.wait_until(lambda: slack.connections, timeout_s=90)
            event_id = slack.dm("hello", user=ALICE)
            slack.wait_until(lambda: slack.calls_of("chat.postMessage"), timeout_s=90)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        slack.release()
        assert slack.dm_texts(ALICE) == [] and len(model.requests) == 1

        second = _start_kernel(settings, slack, log)
        key = f"slack:{event_id}"
        try:
            slack.wait_until(lambda: slack.dm_texts(ALICE), timeout_s=90)
            slack.wait_until(lambda: (_journal_row(db, key) or (0, ""))[1] == "done", 90)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        assert slack.dm_texts(ALICE) == ["echo: hello"], log.read_text()[-3000:]
        assert len(model.requests) == 1  # sent from the record: the turn never ran again


def test_sigkill_after_the_reply_reached_slack_does_not_send_it_again(
    tmp_path, ext_root, settings_file, make_ext
):
    """The kernel dies after Slack got the reply (and the ledger marked it sent) but
    before the bus heard the message was done (a lifecycle hook still busy). The
    message is delivered again after the restart; nothing is sent again."""
    install_extension(ext_root, EXTENSION_ID)
    hook = "async def on_turn_end(self, turn, outcome):\n    await asyncio.sleep(600)"
    make_ext("slow_end", ext_code(hook, "import asyncio"), conversing())
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeSlack() as slack, FakeOpenAIServer() as model:
        settings = slack_settings(
            settings_file,
            slack,
            edit_interval_s=60,
            models=models_section(model.base_url),
            hooks={"timeout_s": 600},
        )
        grant_all(ext_root, tmp_path / "data")
        first = _start_kernel(settings, slack, log)
        try:
            slack.wait_until(lambda: slack.connections, timeout_s=90)
            event_id = slack.dm("hello", user=ALICE)
            slack.wait_until(lambda: slack.dm_texts(ALICE), timeout_s=90)
            slack.wait_until(lambda: replies_marked_sent(tmp_path / "data") == 1, timeout_s=90)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        key = f"slack:{event_id}"
        assert (_journal_row(db, key) or (0, ""))[1] == "inflight"

        second = _start_kernel(settings, slack, log)
        try:
            slack.wait_until(lambda: (_journal_row(db, key) or (0, ""))[1] == "done", 90)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        assert slack.dm_texts(ALICE) == ["echo: hello"], log.read_text()[-3000:]
        assert len(model.requests) == 1  # the redelivery was answered from the record
