"""The interactive CLI in a real pseudo-terminal: prompt, commands, a
proactive message printed while the prompt waits, Ctrl-D exits cleanly."""

from __future__ import annotations

import importlib.util
import os
import pty
import select
import shutil
import sys
import time

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


class Terminal:
    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            os.execv(sys.executable, [sys.executable, *argv])
        self.output = b""

    def expect(self, text: str, timeout: float = 30.0, since: int = 0) -> None:
        """Wait for ``text`` in the output (from offset ``since``)."""
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output[since:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not seen; output so far:\n{self.output!r}")
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.1))
            if ready:
                try:
                    self.output += os.read(self.fd, 4096)
                except OSError:
                    break

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
    term.expect("you>", since=term.output.index(b"ding from the kernel"))  # (re)drawn
    term.send("\x04")  # Ctrl-D
    assert term.wait() == 0
    assert b"Traceback" not in term.output


def test_repl_completes_commands_and_post_processor_names(settings_file, ext_root):
    """Keys are sent only once a prompt is up: prompt_toolkit may drop keys typed
    while it starts one."""
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    term = Terminal([str(PROJECT_ROOT / "main.py"), "--settings", str(settings_file())])
    term.expect("you>")
    term.send("/he")
    term.expect("list the commands")  # the menu offers /help, with its description
    term.send("\t")
    term.expect("lp")
    term.send("\r")
    term.expect("/status —")  # "/he" became /help
    term.expect("you>", since=term.output.index("/status —".encode()))
    term.send("/ext show #dec")
    term.expect("branch key from the answer")  # #decision, with its description
    term.send("\t")
    term.expect("ision")
    term.send("\r")
    term.expect("decision (built-in)")  # "#dec" became #decision
    term.expect("you>", since=term.output.index(b"decision (built-in)"))
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
