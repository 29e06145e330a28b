"""The interactive terminal stays a conversation (issue 18): no log lines between a
question and its answer, tool progress as one replaced status line, Ctrl-C stops
a turn and keeps the session, and quitting takes Ctrl-C twice or Ctrl-D. Driven
through ``main.py`` in a pseudo-terminal against the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_cli_e2e import cli_settings
from test_cli_repl import CLI_EXT, CONTROL_SEQUENCE, Terminal

from conftest import PROJECT_ROOT, ext_code
from core.kernel.turns.cancelling import RunningTurns
from core.runtime import configure_logging
from support.fake_openai import FakeOpenAIServer, ToolCall

LOG_LINE = re.compile(rb"\d{2}:\d{2}:\d{2},\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
CLEAR_LINE = b"\r\x1b[2K"


GRUMBLER = ext_code(
    """
    async def run_background(self):
        import asyncio
        while not (self.ctx.data_dir / "go").exists():
            await asyncio.sleep(0.05)
        self.ctx.logger.info("a detail for the log file only")
        self.ctx.logger.warning("the disk is nearly full")
        await asyncio.Event().wait()
    """
)


def between(output: bytes, start: str, end: str) -> bytes:
    """The raw output between ``start`` and ``end``, which may each arrive in chunks
    with the renderer's control sequences between their characters (under load)."""

    def spread(text: str) -> bytes:
        gap = b"(?:" + CONTROL_SEQUENCE.pattern + b")*"
        return gap.join(re.escape(bytes([c])) for c in text.encode())

    first = re.search(spread(start), output)
    assert first is not None, f"{start!r} not in the output"
    last = re.compile(spread(end)).search(output, first.end())
    assert last is not None, f"{end!r} not after {start!r} in the output"
    return output[first.end() : last.start()]


def test_no_log_line_between_a_question_and_its_answer(settings_file, ext_root, tmp_path):
    with FakeOpenAIServer() as model:
        model.script(ToolCall("current_time", {}), ToolCall("current_time", {}), "It is noon.")
        path = cli_settings(settings_file, ext_root, model.base_url)
        term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(path)])
        term.expect("you>")
        term.send("what time is it?\r")
        term.expect("It is noon.")
        term.expect("you>", after="It is noon.")
        term.send("\x04")
        assert term.wait() == 0
    exchange = between(term.output, "what time is it?", "It is noon.")
    assert LOG_LINE.search(exchange) is None, exchange
    assert b"HTTP Request" not in term.output and LOG_LINE.search(term.output) is None
    # two tool calls: one status line, replaced in place, then cleared for the answer
    assert exchange.count(b"[using current_time") == 2
    status = exchange[exchange.index(b"[using current_time") :]
    assert b"\n" not in status and status.endswith(CLEAR_LINE)
    log = (tmp_path / "data" / "hearth.log").read_text()
    assert "core.kernel.runner" in log  # the logs are in the file instead
    assert b"hearth.log (--verbose shows them here)" in term.output


def test_a_warning_prints_above_the_prompt_and_keeps_the_typed_line(
    make_ext, settings_file, ext_root, tmp_path
):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    make_ext("grumbler", GRUMBLER)
    term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())])
    term.expect("you>")
    term.send("/sta")
    term.expect("/sta")
    (tmp_path / "data" / "extensions" / "grumbler" / "go").touch()
    term.expect("WARNING ext.grumbler: the disk is nearly full")
    term.expect("/sta", after="the disk is nearly full")  # the prompt is redrawn, line intact
    term.send("tus\r")
    term.expect("Uptime:")
    term.expect("you>", after="Uptime:")
    term.send("\x04")
    assert term.wait() == 0
    assert b"a detail for the log file only" not in term.output
    log = (tmp_path / "data" / "hearth.log").read_text()
    assert "a detail for the log file only" in log and "the disk is nearly full" in log


def test_verbose_brings_the_logs_back_to_the_terminal(settings_file, ext_root, tmp_path):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    argv = [str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file()), "--verbose"]
    term = Terminal(argv)
    term.expect("you>")
    term.expect("INFO core.kernel.runner")
    term.send("\x04")
    assert term.wait() == 0
    assert not (tmp_path / "data" / "hearth.log").exists()


def test_ctrl_c_cancels_the_turn_and_keeps_the_session(settings_file, ext_root, tmp_path):
    with FakeOpenAIServer(delay_s=4) as model:
        model.script("Hi Anna.", "Once upon a time…")
        path = cli_settings(settings_file, ext_root, model.base_url)
        term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(path)])
        term.expect("you>")
        term.send("I am Anna\r")
        term.expect("Hi Anna.")
        term.expect("you>", after="Hi Anna.")
        term.send("tell me a long story\r")
        model.wait_for_requests(2, timeout_s=90)
        term.send("\x03")  # Ctrl-C while the slow model is still answering
        term.expect("(cancelled)")
        term.expect("you>", after="(cancelled)")
        term.send("what is my name?\r")
        term.expect("echo: what is my name?", timeout=60)
        term.expect("you>", after="echo: what is my name?")
        term.send("\x03")  # at an empty prompt: asks once
        term.expect("press Ctrl-C again or Ctrl-D to quit")
        term.expect("you>", after="Ctrl-D to quit")
        term.send("\x03")
        assert term.wait(timeout=60) == 0
        requests = model.requests
    assert b"Once upon a time" not in term.output and b"Traceback" not in term.output
    history = [m["content"] for m in requests[2]["messages"] if m["role"] != "system"]
    assert history[0] == "I am Anna" and "Hi Anna." in json.dumps(history[1])
    assert history[-1] == "what is my name?"
    assert "tell me a long story" not in json.dumps(history)  # the cancelled turn left none
    cancelled = events(path, "turn.cancelled")
    assert len(cancelled) == 1 and cancelled[0]["payload"]["channel_id"] == "cli_channel"
    assert len(events(path, "system.turn.cancel")) == 1


def test_a_reminder_during_a_turn_reads_as_a_reminder_and_the_answer_still_comes(
    settings_file, ext_root
):
    from support.scheduler_helpers import install_scheduler

    install_scheduler(ext_root)
    with FakeOpenAIServer() as model:
        # the answer waits for the reminder; the question has 12 s to be typed and taken
        # before it (5 s were not always enough on a loaded 2-core machine)
        model.chunk_gate = answer = threading.Semaphore(0)
        path = cli_settings(settings_file, ext_root, model.base_url)
        term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(path)])
        term.expect("you>")
        term.send("/remind 12s tea\r")
        term.expect("Reminder #1 set for ")
        term.expect("you>", after="Reminder #1 set for ")
        term.send("a slow question\r")
        model.wait_for_requests(1, timeout_s=60)  # the turn is under way: its prompt is gone
        term.expect("Reminder: tea", timeout=60)
        answer.release(1000)
        term.expect("echo: a slow question", timeout=60)
        term.expect("you>", after="echo: a slow question")
        term.send("\x04")
        assert term.wait() == 0
    screen = term.visible  # a streamed answer has the renderer's sequences between chunks
    answered = screen.index(b"echo: a slow question")
    during = screen[screen.rindex(b"a slow question", 0, answered) : answered]
    assert b"\xe2\x8f\xb0 Reminder: tea\r\n" in during  # on a line of its own
    assert b"you>" not in during  # the prompt waited for the answer


def test_ctrl_c_clears_a_typed_line_and_ctrl_d_quits(settings_file, ext_root):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())])
    term.expect("you>")
    term.send("half a thought")
    term.expect("half a thought")
    term.send("\x03")  # clears the line, does not quit
    term.send("/status\r")
    term.expect("Uptime:", timeout=30)
    term.expect("you>", after="Uptime:")
    term.send("\x04")
    assert term.wait() == 0
    assert b"Ctrl-D to quit" not in term.output


def events(settings: Path, topic: str) -> list[dict]:
    shown = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "main.py"),
            "--settings",
            str(settings),
            "events",
            "--topic",
            topic,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(shown.stdout)


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pty")


def test_quiet_logging_keeps_info_in_the_file_and_shows_warnings(tmp_path, capsys):
    log_file = tmp_path / "hearth.log"
    configure_logging("INFO", "text", log_file=log_file)
    try:
        logging.getLogger("core.kernel.test").info("a detail")
        logging.getLogger("core.kernel.test").warning("something to see")
        logging.getLogger("httpx").info("HTTP Request: POST http://x")
        logging.getLogger("openai.agents").info("tracing noise")
        shown = capsys.readouterr().err
    finally:
        configure_logging("INFO", "text")
    assert "something to see" in shown
    assert "a detail" not in shown and "HTTP Request" not in shown and "noise" not in shown
    kept = log_file.read_text()
    assert "a detail" in kept and "something to see" in kept and "HTTP Request" not in kept


async def test_a_cancelled_turn_ends_but_a_stopping_kernel_is_passed_on():
    running = RunningTurns()
    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    turn = asyncio.create_task(running.run("cli:u1", slow()))
    await started.wait()
    assert running.cancel("cli:u1") and await turn is None
    assert not running.cancel("cli:u1")  # nothing running any more

    started.clear()
    outer = asyncio.create_task(running.run("cli:u1", slow()))
    await started.wait()
    outer.cancel()  # the kernel stopping: not a user's cancel
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert await running.run("cli:u1", asyncio.sleep(0, "fine")) == "fine"
