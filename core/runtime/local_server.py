"""The local model's server kept running beside the kernel (ADR 0098).

With ``models.local_server.start`` the supervisor (``main.py daemon``) and a
foreground run (``main.py``) start the llama.cpp server ``main.py setup``
installed, start it again after a backoff when it dies (1 s doubling to
``restart_backoff_max_s``; the streak resets once it ran ``HEALTHY_S``), and
stop it with the kernel. Its output goes to ``<data>/logs/local-model.log``.

A thread, not asyncio: the supervisor has no event loop, and the server must
outlive a kernel that crashes and is restarted. The server runs in its own
session and gets SIGTERM should this process die (Linux), as the supervisor's
kernel does.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from core.runtime.backoff import backoff_delay
from core.runtime.datadir import open_nofollow

__all__ = ["LOCAL_SERVER_LOG", "LocalServerKeeper"]

LOCAL_SERVER_LOG = Path("logs") / "local-model.log"
HEALTHY_S = 600.0  # a server that ran this long before dying starts a new streak
STOP_TIMEOUT_S = 10.0
MAX_LOG_BYTES = 5 * 1024 * 1024
_PR_SET_PDEATHSIG = 1


class LocalServerKeeper:
    """Starts ``argv``, starts it again when it exits, stops it on ``stop()``."""

    def __init__(
        self,
        argv: Sequence[str],
        data_dir: Path,
        log: logging.Logger,
        *,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
    ) -> None:
        self._argv = list(argv)
        self._log_path = data_dir / LOCAL_SERVER_LOG
        self._log = log
        self._initial = backoff_initial_s
        self._max = backoff_max_s
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.starts = 0  # how many times the server was started (restarts + 1)

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> bool:
        """Start keeping the server; ``False`` (logged) when it is not installed."""
        if not os.access(self._argv[0], os.X_OK):
            self._log.error(
                "local model server: %s is missing; `main.py setup` installs it", self._argv[0]
            )
            return False
        self._thread = threading.Thread(target=self._keep, name="local-model-server", daemon=True)
        self._thread.start()
        return True

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL to its group after ``STOP_TIMEOUT_S``)."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            _signal(proc.pid, signal.SIGTERM, group=False)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._log.warning("local model server (pid %d) did not stop: killing it", proc.pid)
                _signal(proc.pid, signal.SIGKILL, group=True)  # and anything it started
                proc.wait()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
        if proc is not None:
            self._log.info("local model server stopped")

    def _keep(self) -> None:
        streak = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            proc = self._spawn()
            if proc is None:
                return
            returncode = proc.wait()
            if self._stopping.is_set():
                return
            ran = time.monotonic() - started
            streak = 1 if ran >= HEALTHY_S else streak + 1
            delay = backoff_delay(streak, self._initial, self._max)
            self._log.error(
                "local model server exited (%s) after %.1f s; starting it again in %g s "
                "(its output: %s)",
                _describe(returncode),
                ran,
                delay,
                self._log_path,
            )
            if self._stopping.wait(delay):
                return

    def _spawn(self) -> subprocess.Popen[bytes] | None:
        self._rotate()
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        fd = open_nofollow(self._log_path, flags, below=self._log_path.parent.parent)
        try:
            with self._lock:
                if self._stopping.is_set():
                    return None
                self._proc = subprocess.Popen(
                    self._argv,
                    stdin=subprocess.DEVNULL,
                    stdout=fd,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_terminate_with_parent,
                )
                self.starts += 1
                proc = self._proc
        except OSError as exc:
            self._log.critical("cannot start the local model server %s: %s", self._argv[0], exc)
            return None
        finally:
            os.close(fd)
        self._log.info("local model server started (pid %d): %s", proc.pid, " ".join(self._argv))
        return proc

    def _rotate(self) -> None:
        """One older log kept: a server that writes a lot never fills the disk."""
        try:
            if self._log_path.stat().st_size > MAX_LOG_BYTES:
                os.replace(self._log_path, self._log_path.with_name(self._log_path.name + ".1"))
        except FileNotFoundError:
            pass


def _describe(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def _signal(pid: int, signum: int, *, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _terminate_with_parent() -> None:
    """In the child, before exec: SIGTERM it when this process dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
