"""``main.py extensions reload ID`` against a running kernel subprocess (issue 18,
ADR 0032): the request goes through the journal, the kernel reloads the
extension, and the next turn uses the changed tool; with no kernel running the
command says so and fails."""

from __future__ import annotations

import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from test_extension_reload import greeter

from conftest import PROJECT_ROOT, grant_all
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"
MAIN = str(PROJECT_ROOT / "main.py")


def reload_cli(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, MAIN, "--settings", str(settings), "extensions", "reload", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


class Kernel:
    """``main.py`` in a subprocess: chat lines in through stdin, replies read from stdout."""

    def __init__(self, settings: Path, log: Path) -> None:
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, MAIN, "--settings", str(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))

    def ask(self, text: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self._lines.get(timeout=60)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # end of input: the CLI channel stops the kernel
        try:
            return self.proc.wait(timeout=60)
        finally:
            self._log.close()


def test_extensions_reload_reaches_the_running_kernel(
    settings_file, ext_root, make_ext, tmp_path, storage_backend
):
    with FakeOpenAIServer() as model:
        model.script(ToolCall("greet"), "first", ToolCall("greet"), "second")
        shutil.copytree(CLI_EXT, ext_root / "cli_channel")
        ext_dir = make_ext("greeter", greeter("v1"))
        path = settings_file(
            models=models_section(model.base_url),
            events={"poll_interval_s": 0.2},
            storage=storage_backend,
        )
        kernel = Kernel(path, tmp_path / "kernel.log")
        try:
            assert kernel.ask("greet me") == "first"
            (ext_dir / "main.py").write_text(greeter("v2"))
            grant_all(ext_root, tmp_path / "data", only="greeter")  # a grant binds code
            result = reload_cli(path, "greeter")
            assert result.returncode == 0, result.stderr
            assert result.stdout.startswith("Reloaded greeter in ")
            assert kernel.ask("greet me again") == "second"
        finally:
            code = kernel.close()
        assert code == 0, (tmp_path / "kernel.log").read_text()
        tool_results = [r["messages"][-1]["content"] for r in model.requests[1::2]]
        assert tool_results == ["hello from v1", "hello from v2"]

    # the kernel has stopped: nobody answers, and the command says so
    result = reload_cli(path, "greeter", "--timeout", "2")
    assert result.returncode == 1
    assert "no running kernel answered within 2 s" in result.stderr


def test_extensions_reload_before_any_kernel_ran(settings_file, tmp_path):
    result = reload_cli(settings_file(), "greeter")
    assert result.returncode == 1
    assert "no kernel has run with the data dir" in result.stderr
