"""One kernel child process: spawn, pump its output, signal it, reap it.

The kernel runs in its own session (process group), so a final kill reaches
everything it started. Its exit is awaited with ``waitid(WNOWAIT)`` in a
thread: the zombie keeps the group id reserved until the supervisor has
killed any leftovers of the group, and only then is it reaped.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from core.supervisor.crashlog import OutputTail

MAX_LINE_BYTES = 64 * 1024
_PR_SET_PDEATHSIG = 1
_PUMP_JOIN_TIMEOUT_S = 5.0


class KernelProcess:
    """A running kernel; ``on_exit(pid)`` is called from a thread when it ends."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        output: logging.Logger,
        on_exit: Callable[[int], None],
    ) -> None:
        self.tail = OutputTail()
        self.started_at = time.monotonic()
        self._output = output
        self._proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_terminate_with_parent,
        )
        self.pid = self._proc.pid
        self._returncode: int | None = None  # set once reaped: the pid may be reused after
        assert self._proc.stdout is not None
        self._pump = _daemon_thread(self._pump_output, self._proc.stdout, name="kernel-output")
        self._waiter = _daemon_thread(self._await_exit, on_exit, name="kernel-waiter")

    def terminate(self) -> None:
        """Ask the kernel to shut down gracefully (SIGTERM to the kernel only)."""
        if self._returncode is None:
            _signal_quietly(lambda: os.kill(self.pid, signal.SIGTERM))

    def kill_group(self) -> None:
        """SIGKILL the kernel and everything in its process group."""
        if self._returncode is None:
            _signal_quietly(lambda: os.killpg(self.pid, signal.SIGKILL))

    def reap(self) -> int:
        """Once the kernel has exited: kill leftovers, collect the status, drain output.

        Returns the ``Popen.returncode`` (negative: killed by that signal).
        """
        if self._returncode is None:
            self._waiter.join()
            self.kill_group()
            self._returncode = self._proc.wait()
            self._pump.join(_PUMP_JOIN_TIMEOUT_S)
        return self._returncode

    def _await_exit(self, on_exit: Callable[[int], None]) -> None:
        if hasattr(os, "waitid"):
            os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        else:  # pragma: no cover - platforms without waitid reap here
            self._proc.wait()
        on_exit(self.pid)

    def _pump_output(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(lambda: stream.readline(MAX_LINE_BYTES), b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                self.tail.append(line)
                self._output.info(line)


def _daemon_thread(target: Callable[..., None], *args: object, name: str) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def _signal_quietly(send: Callable[[], None]) -> None:
    """Signal a process that may already be gone."""
    try:
        send()
    except ProcessLookupError:
        pass


def _terminate_with_parent() -> None:
    """In the child, before exec: SIGTERM us if the supervisor dies (Linux).

    Without it a SIGKILLed supervisor would leave its kernel running, since
    the kernel lives in its own session. Elsewhere this is a no-op.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
