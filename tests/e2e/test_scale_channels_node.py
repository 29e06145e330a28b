"""The bundled channels on a ``channels`` node (issue 41, ADR 0070): a ``kernel.role:
channels`` process runs the CLI or Telegram, a ``workers`` process the turns, on one
fresh PostgreSQL database. Every line the user types is journaled and answered, in
order, once — with the worker up, and on a fresh deployment where the lines were
typed before the first worker ever started."""

from __future__ import annotations

import json
import shutil

import asyncpg
import pytest

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer
from support.fake_telegram import FakeTelegram
from support.kernel_process import wait_until
from support.pg_helpers import run_sync
from support.scale_support import Cluster
from support.telegram_support import ALICE, EXTENSION_ID, install_extension, telegram_config

READY = "kernel ready"
CLI = "cli_channel"
LINES = ["first", "second", "third"]
ECHOES = [f"echo: {line}" for line in LINES]


async def _user_messages(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT payload FROM journal_events WHERE topic = 'user.message' ORDER BY id"
        )
    finally:
        await conn.close()
    return [json.loads(r["payload"])["text"] for r in rows]


def _journaled(dsn: str) -> list[str]:
    return run_sync(lambda: _user_messages(dsn))


@pytest.mark.parametrize("worker_first", [True, False], ids=["worker-up", "fresh-deployment"])
def test_every_line_piped_into_a_channels_node_is_answered_in_order_once(
    ext_root, tmp_path, postgres_dsn, worker_first
):
    shutil.copytree(PROJECT_ROOT / "sandbox" / "extensions" / CLI, ext_root / CLI)
    with FakeOpenAIServer(delay_s=0.1) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv)
        cli_sections = {"channels": {"default": CLI}, "extensions": {}}
        try:
            if worker_first:
                cluster.start("worker", "workers", **cli_sections)
                cluster.wait_log("worker", READY)
            front = cluster.start_piped("front", "channels", **cli_sections)
            cluster.wait_log("front", READY)
            for line in LINES:  # printf 'first\nsecond\nthird\n' | main.py
                front.type(line)
            front.close()  # end of input: once all is answered, the process shuts down
            if not worker_first:  # the first line waits for the first worker
                wait_until(lambda: _journaled(postgres_dsn) == LINES[:1], 60)
                assert front.lines == []
                cluster.start("worker", "workers", **cli_sections)
            wait_until(
                lambda: len(front.lines) >= len(LINES),
                120,
                lambda: f"{front.lines}\n{cluster.log('front')[-3000:]}",
            )
            assert front.proc.wait(timeout=60) == 0, cluster.log("front")[-3000:]
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) <= {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert front.lines == ECHOES
    assert _journaled(postgres_dsn) == LINES
    assert [r.get("messages", [{}])[-1].get("content") for r in srv.requests] == LINES


@pytest.mark.parametrize("worker_first", [True, False], ids=["worker-up", "fresh-deployment"])
def test_every_telegram_message_to_a_channels_node_is_answered_in_order_once(
    ext_root, tmp_path, postgres_dsn, worker_first
):
    install_extension(ext_root)
    with FakeTelegram() as tg, FakeOpenAIServer(delay_s=0.1) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv)
        sections = {
            "channels": {"default": EXTENSION_ID},
            "extensions": {EXTENSION_ID: telegram_config(tg)},
        }
        env = {"TELEGRAM_BOT_TOKEN": tg.token}
        try:
            if worker_first:
                cluster.start("worker", "workers", env, **sections)
                cluster.wait_log("worker", READY)
            cluster.start("front", "channels", env, **sections)
            cluster.wait_log("front", READY)
            for line in LINES:
                tg.send_update(line, user_id=ALICE)
            if not worker_first:
                wait_until(lambda: _journaled(postgres_dsn) == LINES, 60)
                assert tg.chat_texts(ALICE) == []
                cluster.start("worker", "workers", env, **sections)
            tg.wait_until(lambda: len(tg.chat_texts(ALICE)) >= len(LINES), timeout_s=120)
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert tg.chat_texts(ALICE) == ECHOES
    assert _journaled(postgres_dsn) == LINES


def test_lines_typed_by_hand_at_a_channels_node_are_answered_in_order(
    ext_root, tmp_path, postgres_dsn, monkeypatch
):
    from test_cli_repl import Terminal

    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    shutil.copytree(PROJECT_ROOT / "sandbox" / "extensions" / CLI, ext_root / CLI)
    with FakeOpenAIServer(delay_s=0.1) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv)
        cli_sections = {"channels": {"default": CLI}, "extensions": {}}
        try:
            cluster.start("worker", "workers", **cli_sections)
            cluster.wait_log("worker", READY)
            settings = cluster.settings_for("front", "channels", **cli_sections)
            term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings)])
            term.expect("you>", timeout=60)
            for line, echo in zip(LINES, ECHOES, strict=True):
                term.send(f"{line}\r")
                term.expect(echo, timeout=60, after=f"you> {line}")
                term.expect("you>", timeout=30, after=echo)  # the prompt is back
            term.send("\x04")  # Ctrl-D
            assert term.wait(timeout=60) == 0
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert _journaled(postgres_dsn) == LINES


async def test_the_http_api_on_a_channels_node_answers_whole_and_streamed(
    ext_root, tmp_path, postgres_dsn, monkeypatch
):
    """The HTTP API gets another node's reply as the message's stream too (ADR 0070):
    a request reading it whole and one reading SSE are both answered."""
    from support.http_api_support import TOKEN, client, install, serving

    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    with FakeOpenAIServer(delay_s=0.1) as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv)
        sections = {
            "channels": {"default": "http_api"},
            "extensions": {"http_api": {"listen": "127.0.0.1:0"}},
        }
        try:
            cluster.start("worker", "workers", {"HEARTH_API_TOKEN": TOKEN}, **sections)
            cluster.wait_log("worker", READY)
            settings = cluster.settings_for("front", "channels", **sections)
            async with serving(settings) as (_, base):
                api = client(base)
                whole = await api.chat.completions.create(
                    model="hearth", messages=[{"role": "user", "content": "first"}]
                )
                stream = await api.chat.completions.create(
                    model="hearth", messages=[{"role": "user", "content": "second"}], stream=True
                )
                pieces = [c.choices[0].delta.content async for c in stream if c.choices]
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert whole.choices[0].message.content == "echo: first"
    assert "".join(p for p in pieces if p) == "echo: second"
