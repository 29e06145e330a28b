"""Crash safety of the Telegram channel: a kernel SIGKILLed after ``getUpdates``
returned a message but before the reply answers it exactly once after restart.

The kernel runs as a real subprocess (``main.py``); Telegram and the model are
fake HTTP servers on 127.0.0.1 running in this test process.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT_ROOT, ext_code, grant_all
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.fake_telegram import FakeTelegram
from support.files_kit import chart_code, png
from support.harness import conversing
from support.kernel_process import replies_marked_sent
from support.telegram_support import ALICE, install_extension, write_settings


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
    return int(row[0]), (status[0] if status else None)


def _event_count(db: Path, key: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        query = "SELECT COUNT(*) FROM events WHERE idempotency_key = ?"
        return int(conn.execute(query, (key,)).fetchone()[0])


def _start_kernel(settings: Path, token: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TELEGRAM_BOT_TOKEN": token, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
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
    install_extension(ext_root)
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeTelegram() as tg, FakeOpenAIServer(delay_s=30) as model:
        settings = write_settings(
            settings_file,
            tg,
            sections={"models": models_section(model.base_url)},
        )
        key_of = "telegram:{}".format
        acks: list[tuple[int, bool]] = []  # (offset, was the acknowledged update journaled?)

        def on_poll(offset: int | None) -> None:
            if offset is not None:
                acks.append((offset, _journal_row(db, key_of(offset - 1)) is not None))

        tg.on_get_updates = on_poll
        first = _start_kernel(settings, tg.token, log)
        try:
            tg.wait_until(lambda: tg.calls_of("getUpdates"), timeout_s=90)
            update_id = tg.send_update("remember me", user_id=ALICE)
            model.wait_for_requests(1, timeout_s=90)  # fetched, journaled, turn under way
            tg.wait_until(lambda: any(offset > update_id for offset, _ in acks))
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert acks and all(journaled for _, journaled in acks), acks
        assert tg.calls_of("sendMessage") == []

        tg.unconfirm(update_id)  # as if the kill had beaten the acknowledgement
        model.delay_s = 0
        second = _start_kernel(settings, tg.token, log)
        try:
            tg.wait_until(lambda: tg.chat_texts(ALICE), timeout_s=90)
            tg.wait_until(lambda: (_journal_row(db, key_of(update_id)) or (0, ""))[1] == "done")
            polled_again = len(tg.calls_of("getUpdates")) + 2
            tg.wait_until(lambda: len(tg.calls_of("getUpdates")) >= polled_again)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        assert tg.chat_texts(ALICE) == ["echo: remember me"], log.read_text()[-3000:]
        assert len(tg.calls_of("sendMessage")) == 1
        assert _event_count(db, key_of(update_id)) == 1  # the re-delivered copy was a no-op
        assert len(model.requests) == 2  # the killed turn, and its one re-run
        redelivered = [c for c in tg.calls_of("getUpdates") if c.params.get("offset") is None]
        assert len(redelivered) >= 2  # each kernel started polling without an offset


def test_sigkill_after_the_reply_was_sent_does_not_send_it_again(
    tmp_path, ext_root, settings_file, make_ext
):
    """The kernel dies after the reply reached Telegram but before the bus heard the
    message was done (here: a lifecycle hook still busy with the turn's end). The
    message is delivered again after the restart; its reply was sent, so nothing is
    sent again (issue 41: the soak saw two copies of a reply)."""
    install_extension(ext_root)
    hook = "async def on_turn_end(self, turn, outcome):\n    await asyncio.sleep(600)"
    make_ext("slow_end", ext_code(hook, "import asyncio"), conversing())
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        settings = write_settings(
            settings_file,
            tg,
            sections={"models": models_section(model.base_url), "hooks": {"timeout_s": 600}},
        )
        grant_all(ext_root, tmp_path / "data")
        first = _start_kernel(settings, tg.token, log)
        try:
            tg.wait_until(lambda: tg.calls_of("getUpdates"), timeout_s=90)
            update_id = tg.send_update("hello", user_id=ALICE)
            tg.wait_until(lambda: tg.chat_texts(ALICE), timeout_s=90)
            # the ledger knows the reply was handed over (the one small write after the
            # send: a kill before it may still send again, which is not this test's case)
            tg.wait_until(lambda: replies_marked_sent(tmp_path / "data") == 1, timeout_s=90)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert (_journal_row(db, f"telegram:{update_id}") or (0, ""))[1] == "inflight"

        second = _start_kernel(settings, tg.token, log)
        try:
            key = f"telegram:{update_id}"
            tg.wait_until(lambda: (_journal_row(db, key) or (0, ""))[1] == "done", timeout_s=90)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        assert tg.chat_texts(ALICE) == ["echo: hello"], log.read_text()[-3000:]
        assert len(model.requests) == 1  # the redelivery was answered from the record


def test_a_reply_sent_again_after_sigkill_takes_its_photo_once(
    tmp_path, ext_root, settings_file, make_ext
):
    """The turn recorded its answer and kept the tool's PNG; the kernel dies while the
    photo is on its way (``sendPhoto`` never answered). After the restart the message
    is delivered again: the recorded reply goes, and the photo with it, once — the
    model is not asked again (issue 45)."""
    install_extension(ext_root)
    make_ext("charts", chart_code())
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeTelegram() as tg, FakeOpenAIServer() as model:
        model.script(ToolCall("chart", {}, call_id="c1"), "here it is")
        settings = write_settings(
            settings_file, tg, sections={"models": models_section(model.base_url)}
        )
        grant_all(ext_root, tmp_path / "data")
        tg.hang_next("sendPhoto")
        first = _start_kernel(settings, tg.token, log)
        try:
            tg.wait_until(lambda: tg.calls_of("getUpdates"), timeout_s=90)
            update_id = tg.send_update("draw the chart", user_id=ALICE)
            tg.wait_until(lambda: tg.calls_of("sendPhoto"), timeout_s=90)
        finally:
            first.send_signal(signal.SIGKILL)  # the photo was not sent, nor the reply
            first.wait(timeout=10)
        assert tg.messages(ALICE) == [], log.read_text()[-3000:]

        second = _start_kernel(settings, tg.token, log)
        try:
            key = f"telegram:{update_id}"
            tg.wait_until(lambda: (_journal_row(db, key) or (0, ""))[1] == "done", timeout_s=90)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)

        sent = tg.messages(ALICE)
        photos = [m for m in sent if m.upload is not None]
        assert [m.text for m in sent] == ["the chart", "here it is"], log.read_text()[-3000:]
        assert len(photos) == 1 and photos[0].upload.data == png()
        assert len(tg.calls_of("sendPhoto")) == 2  # the cut one, and the one that arrived
        assert len(model.requests) == 2  # the tool call and the answer: not run again
