"""Real kernel processes for the crash and scale suites: ``main.py`` started as a
subprocess (as under a supervisor), a hard kill, and polling for what the
process writes to disk."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from conftest import PROJECT_ROOT


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent counts as gone: PID 1 in a
    container may not reap)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def start_kernel(
    settings: Path, stderr: int | IO[str] = subprocess.PIPE, **env: str
) -> subprocess.Popen[str]:
    """``main.py --settings settings`` as a supervised child (``env`` added to ours)."""
    return subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        env={**os.environ, "HEARTH_SUPERVISED": "1", **env},
    )


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL: the process gets no chance to finish anything it was doing."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def wait_until(
    condition: Callable[[], object],
    timeout_s: float = 90.0,
    describe: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` until it holds; the deadline only ends a wait that would
    never succeed, so it is generous: ``make test`` runs more workers than cores,
    and a kernel process starting there may take tens of seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(describe() if describe else f"not within {timeout_s} s")
        time.sleep(0.05)


def replies_marked_sent(data_dir: Path) -> int:
    """How many recorded replies the ledger (``sessions.db`` in ``data_dir``) marks as
    handed to their channel: a crash test kills the kernel only once the mark is
    written, else on a loaded machine the reply may be out but not yet marked."""
    sessions = data_dir / "sessions.db"
    if not sessions.exists():
        return 0
    with sqlite3.connect(f"file:{sessions}?mode=ro", uri=True, timeout=5) as conn:
        row = conn.execute("SELECT count(*) FROM hearth_turns WHERE sent_at IS NOT NULL")
        return int(row.fetchone()[0])
