"""Crash safety of the Discord channel (the kernel a real ``main.py`` process):
a SIGKILL after the answer was made but before it reached Discord delivers it
once after the restart, and the message the gateway delivers again is not
answered twice (its message id is the idempotency key); killed after the reply
reached Discord, nothing is sent again. Discord and the model
are fakes on 127.0.0.1 in this test process."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conftest import ext_code, grant_all
from support.discord_support import ALICE, install, write_settings
from support.fake_discord import FakeDiscord
from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import conversing
from support.kernel_process import kill, replies_marked_sent, start_kernel


def _router_status(db: Path, key: str) -> str | None:
    """The router's delivery status of the event with this idempotency key."""
    if not db.exists():
        return None
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute(
            "SELECT d.status FROM events e JOIN deliveries d ON d.event_id = e.id "
            "WHERE e.idempotency_key = ? AND d.subscriber_id = 'kernel.router'",
            (key,),
        ).fetchone()
    return row[0] if row else None


def _events(db: Path, key: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        query = "SELECT COUNT(*) FROM events WHERE idempotency_key = ?"
        return int(conn.execute(query, (key,)).fetchone()[0])


def test_sigkill_between_the_answer_and_its_sending_delivers_it_once_after_restart(
    tmp_path, ext_root, settings_file
):
    install(ext_root)
    db = tmp_path / "data" / "events.db"
    log = (tmp_path / "kernel.log").open("a")
    with FakeDiscord() as dc, FakeOpenAIServer() as model:
        settings = write_settings(
            settings_file, dc, sections={"models": models_section(model.base_url)}
        )
        env = {"DISCORD_BOT_TOKEN": dc.token, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        first = start_kernel(settings, stderr=log, **env)
        try:
            dc.wait_until(dc.is_connected, timeout_s=90)
            dc.hold_sends()  # the reply will hang on its way to Discord
            message_id = dc.send_dm("remember me", user_id=ALICE, replay=True)
            dc.wait_until(lambda: dc.calls_of("POST", "/messages"), timeout_s=90)
        finally:
            kill(first)
        key = f"discord:{message_id}"
        assert len(model.requests) == 1  # answered: the kill came between answer and send
        assert _router_status(db, key) == "inflight"
        dc.drop_held()
        assert dc.dm_texts(ALICE) == []

        second = start_kernel(settings, stderr=log, **env)  # the gateway delivers it again
        try:
            dc.wait_until(lambda: dc.identifies >= 2, timeout_s=90)
            dc.wait_until(lambda: dc.dm_texts(ALICE), timeout_s=90)
            dc.wait_until(lambda: _router_status(db, key) == "done", timeout_s=30)
        finally:
            second.terminate()
            second.wait(timeout=30)
        log.close()

    assert dc.dm_texts(ALICE) == ["echo: remember me"], (tmp_path / "kernel.log").read_text()[
        -3000:
    ]
    assert _events(db, key) == 1  # the copy the gateway delivered again was a no-op
    assert len(model.requests) == 1  # the restart sent the recorded answer, no second turn


def test_sigkill_after_the_reply_reached_discord_does_not_send_it_again(
    tmp_path, ext_root, settings_file, make_ext
):
    """The kernel dies after the reply reached Discord but before the bus heard the
    message was done (a lifecycle hook still busy with the turn's end): the message
    is delivered again after the restart, and its reply is not sent again."""
    install(ext_root)
    hook = "async def on_turn_end(self, turn, outcome):\n    await asyncio.sleep(600)"
    make_ext("slow_end", ext_code(hook, "import asyncio"), conversing())
    db = tmp_path / "data" / "events.db"
    log = (tmp_path / "kernel.log").open("a")
    with FakeDiscord() as dc, FakeOpenAIServer() as model:
        sections = {"models": models_section(model.base_url), "hooks": {"timeout_s": 600}}
        settings = write_settings(settings_file, dc, sections=sections)
        grant_all(ext_root, tmp_path / "data")
        env = {"DISCORD_BOT_TOKEN": dc.token, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        first = start_kernel(settings, stderr=log, **env)
        try:
            dc.wait_until(dc.is_connected, timeout_s=90)
            message_id = dc.send_dm("hello", user_id=ALICE, replay=True)
            dc.wait_until(lambda: dc.dm_texts(ALICE), timeout_s=90)
            dc.wait_until(lambda: replies_marked_sent(tmp_path / "data") == 1, timeout_s=90)
        finally:
            kill(first)
        key = f"discord:{message_id}"
        assert _router_status(db, key) == "inflight"

        second = start_kernel(settings, stderr=log, **env)
        try:
            dc.wait_until(lambda: dc.identifies >= 2, timeout_s=90)
            dc.wait_until(lambda: _router_status(db, key) == "done", timeout_s=90)
        finally:
            second.terminate()
            second.wait(timeout=30)
        log.close()

    assert dc.dm_texts(ALICE) == ["echo: hello"], (tmp_path / "kernel.log").read_text()[-3000:]
    assert len(model.requests) == 1  # the redelivery was answered from the record
    assert _events(db, key) == 1
