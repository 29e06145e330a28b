"""The interactive CLI in a real pseudo-terminal: prompt, commands, a
proactive message printed while the prompt waits, Ctrl-D exits cleanly."""

from __future__ import annotations

import importlib.util
import os
import pty
import re
import select
import shutil
import sys
import time

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from conftest import PROJECT_ROOT, ext_code

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"

PINGER = ext_code(
    """
    async def run_background(self):
        import asyncio
        await asyncio.sleep(1.5)
        await self.ctx.notify_user("ding from the kernel")
        await asyncio.Event().wait()
    """
)


CURSOR_POSITION_REQUEST = b"\x1b[6n"
# CSI (ESC [ ... final), OSC (ESC ] ... BEL), charset (ESC ( B) and keypad (ESC = / >)
CONTROL_SEQUENCE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")


class Terminal:
    """A pseudo-terminal that, like a real one, answers cursor position requests:
    prompt_toolkit asks before each prompt and, left unanswered, may swallow a
    key typed while it waits."""

    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            os.execv(sys.executable, [sys.executable, *argv])
        self.output = b""
        self.answered = 0

    def expect(self, text: str, timeout: float = 30.0, *, after: str | None = None) -> None:
        """Wait for ``text`` on the screen (only where it follows ``after``, when given).

        Terminal control sequences are not part of the text: a streamed reply comes
        in chunks with the renderer's sequences between them ("echo: \\x1b[?7hwhat")."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.visible[self._start(after) :]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not seen; output so far:\n{self.output!r}")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.1))
            if ready:
                try:
                    self.output += os.read(self.fd, 4096)
                except OSError:
                    break
                self._answer_cursor_requests()

    @property
    def visible(self) -> bytes:
        """The output without terminal control sequences."""
        return CONTROL_SEQUENCE.sub(b"", self.output)

    def _start(self, after: str | None) -> int:
        if after is None:
            return 0
        visible = self.visible
        found = visible.find(after.encode())
        return len(visible) if found < 0 else found + len(after.encode())

    def _answer_cursor_requests(self) -> None:
        asked = self.output.count(CURSOR_POSITION_REQUEST)
        for _ in range(asked - self.answered):
            os.write(self.fd, b"\x1b[24;1R")
        self.answered = asked

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                self.expect("\x00never", timeout=0.1)
            except AssertionError:
                pass
        raise AssertionError("kernel did not exit")


def test_repl_answers_commands_prints_proactive_messages_and_exits(
    make_ext, settings_file, ext_root
):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    make_ext("pinger", PINGER)
    term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())])
    term.expect("you>")
    term.send("/help\r")
    term.expect("/status")
    term.expect("ding from the kernel")  # printed while the prompt waits
    # while it prints, prompt_toolkit puts the terminal in cooked mode, where the line
    # discipline itself eats a Ctrl-D; a person types it at the redrawn prompt
    term.expect("you>", after="ding from the kernel")
    term.send("\x04")  # Ctrl-D
    assert term.wait() == 0
    assert b"Traceback" not in term.output


@pytest.mark.usefixtures("postprocessors")
def test_repl_completes_commands_and_post_processor_names(settings_file, ext_root):
    """Keys are typed at a drawn prompt, as a person would (see the test above)."""
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())])
    term.expect("you>")
    term.send("/he")
    term.expect("list the commands")  # the menu offers /help, with its description
    term.send("\t")
    term.expect("lp")
    term.send("\r")
    term.expect("/status —")  # "/he" became /help
    term.expect("you>", after="/status —")
    term.send("/ext show #dec")
    term.expect("branch key from the answer")  # #decision, with its description
    term.send("\t")
    term.expect("ision")
    term.send("\r")
    term.expect("decision (postprocessors)")  # "#dec" became #decision
    term.expect("you>", after="decision (postprocessors)")
    term.send("\x04")
    assert term.wait() == 0
    assert b"Traceback" not in term.output


def test_the_completer_offers_commands_at_the_start_and_names_after_a_blank():
    spec = importlib.util.spec_from_file_location("cli_completion", CLI_EXT / "completion.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    completer = module.HearthCompleter()
    completer.update([("help", "list"), ("last", "results")], [("json", "as JSON"), ("json2", "")])

    def offered(text: str) -> list[tuple[str, int]]:
        found = completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
        return [(c.text, c.start_position) for c in found]

    assert offered("/l") == [("/last", -2)]
    assert offered("What now? #js") == [("#json", -3), ("#json2", -3)]
    assert offered("#") == [("#json", -1), ("#json2", -1)]
    assert offered("say /l") == [] and offered("issue#js") == [] and offered("plain") == []
