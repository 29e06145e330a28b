"""The e-mail channel across a SIGKILL, with the real ``main.py`` against Dovecot
and aiosmtpd: killed while the model answers, and restarted as if the kill had
also beaten the mail's acknowledgement (the mail unread again and the inbox's
UID forgotten), the mail is journaled once, the model asked again once, and
the answer mailed exactly once."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from support.email_support import (
    BOT,
    PASSWORD,
    Dovecot,
    SmtpSink,
    body,
    install_extension,
    mail,
    servers_missing,
    until,
    write_settings,
)
from support.fake_openai import FakeOpenAIServer, models_section

pytestmark = pytest.mark.skipif(servers_missing() is not None, reason=str(servers_missing()))

ALICE = "alice@family.test"


@pytest.fixture
def dovecot():
    server = Dovecot().start()
    yield server
    server.stop()


@pytest.fixture
def smtp():
    sink = SmtpSink().start()
    yield sink
    sink.stop()


async def test_a_sigkill_between_answer_and_send_delivers_once_after_restart(
    dovecot, smtp, tmp_path, ext_root, settings_file
):
    install_extension(ext_root)
    db = tmp_path / "data" / "events.db"
    log = tmp_path / "kernel.log"
    with FakeOpenAIServer(delay_s=30) as model:
        settings = write_settings(
            settings_file,
            dovecot,
            smtp,
            [ALICE],
            sections={"models": models_section(model.base_url)},
        )
        first = _start_kernel(settings, log)
        try:
            sent = mail(ALICE, "remember me", subject="Crash")
            dovecot.deliver(sent)
            await until(lambda: len(model.requests) >= 1, timeout=90)
            key = f"email:{sent['Message-ID']}"
            assert _event_count(db, key) == 1  # journaled before the model was asked
            state = await until(lambda: _state_file(tmp_path), timeout=30)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert smtp.to(ALICE) == []

        state.unlink()  # the restart reads the mail again ...
        _mark_unread(dovecot)  # ... as if it had never been acknowledged
        model.delay_s = 0
        second = _start_kernel(settings, log)
        try:
            await until(lambda: smtp.to(ALICE), timeout=90)
            await until(lambda: _status(db, key) == "done", timeout=90)
            await until(lambda: _state_file(tmp_path), timeout=30)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=30)
    answers = smtp.to(ALICE)
    assert [body(m) for m in answers] == ["echo: remember me"], log.read_text()[-3000:]
    assert answers[0]["In-Reply-To"] == sent["Message-ID"]
    assert _event_count(db, key) == 1  # the mail read again was a no-op
    assert len(model.requests) == 2  # the killed turn, and its one re-run


def _start_kernel(settings: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EMAIL_PASSWORD": PASSWORD, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    return subprocess.Popen(
        [sys.executable, "main.py", "--settings", str(settings)],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )


def _state_file(root: Path) -> Path | None:
    found = list((root / "data").rglob("inbox.json"))
    return found[0] if found else None


def _mark_unread(dovecot: Dovecot) -> None:
    client = dovecot.client(BOT)
    try:
        client.select("INBOX")
        status, said = client.store("1:*", "-FLAGS", r"(\Seen)")
        assert status == "OK", said
    finally:
        client.logout()


def _event_count(db: Path, key: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        query = "SELECT COUNT(*) FROM events WHERE idempotency_key = ?"
        return int(conn.execute(query, (key,)).fetchone()[0])


def _status(db: Path, key: str) -> str | None:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute(
            "SELECT d.status FROM deliveries d JOIN events e ON e.id = d.event_id "
            "WHERE e.idempotency_key = ? AND d.subscriber_id = 'kernel.router'",
            (key,),
        ).fetchone()
    return str(row[0]) if row else None
