"""The interactive CLI in a real pseudo-terminal: prompt, commands, a
proactive message printed while the prompt waits, Ctrl-D exits cleanly."""

from __future__ import annotations

import os
import pty
import select
import shutil
import sys
import time

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

    def expect(self, text: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.output:
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
    term.send("\x04")  # Ctrl-D
    assert term.wait() == 0
    assert b"Traceback" not in term.output
