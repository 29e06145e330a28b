"""End to end through the CLI channel: ``/remind 2s hello`` prints ``hello``
about two seconds later while stdin stays open; closing stdin exits cleanly."""

from __future__ import annotations

import queue
import shutil
import subprocess
import sys
import threading
import time

from conftest import PROJECT_ROOT
from support.scheduler_helpers import install_scheduler

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"


def test_remind_prints_the_text_two_seconds_later(settings_file, ext_root):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    install_scheduler(ext_root)
    path = settings_file()
    proc = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[tuple[float, str]] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put((time.monotonic(), line.rstrip("\n")))

    threading.Thread(target=read, daemon=True).start()
    seen: list[tuple[float, str]] = []
    try:
        assert proc.stdin is not None
        sent = time.monotonic()
        proc.stdin.write("/remind 2s hello\n")
        proc.stdin.flush()
        deadline = sent + 30
        while True:
            at, line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            seen.append((at, line))
            if line == "⏰ Reminder: hello":  # a reminder, not a reply
                break
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (set_at, confirmation), (hello_at, _) = seen[0], seen[-1]
    assert confirmation.startswith("Reminder #1 set for ") and confirmation.endswith(": hello")
    took = hello_at - set_at  # from the confirmation (the kernel's start-up is not counted)
    assert 1.5 <= took <= 5.0, f"hello {took:.2f} s after the confirmation"
