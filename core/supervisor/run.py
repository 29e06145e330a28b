"""The supervisor loop behind ``main.py daemon`` (SPEC §5).

Single-threaded control: the main thread waits on one queue that receives
both "kernel exited" (from the waiter thread) and "stop signal" (from the
signal handlers; ``SimpleQueue.put`` is safe there). Each decision — restart
now, restart after backoff, give up, stop — is then taken in one place.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from core.config import PROJECT_ROOT, Settings, SupervisorSettings
from core.runtime import (
    EXIT_CLEAN,
    SUPERVISED_ENV,
    LocalServerKeeper,
    SymlinkRefusedError,
    take_restart_request,
)
from core.supervisor.crashlog import describe_exit, summarize_crash
from core.supervisor.kernel import KernelProcess
from core.supervisor.logs import KERNEL_OUTPUT_LOGGER, SUPERVISOR_LOGGER, configure_logging
from core.supervisor.pidfile import PidFile, SupervisorAlreadyRunningError
from core.supervisor.policy import CrashPolicy, RestartRequestPolicy

EXIT_OK = 0
EXIT_GAVE_UP = 1
EXIT_ALREADY_RUNNING = 2

_log = logging.getLogger(SUPERVISOR_LOGGER)


@dataclass(frozen=True)
class _KernelExited:
    pid: int


@dataclass(frozen=True)
class _StopSignal:
    signum: int


_Event = _KernelExited | _StopSignal


def run_supervisor(
    settings: Settings, settings_file: Path | None, *, kernel_argv: list[str] | None = None
) -> int:
    """Run the kernel until told to stop; returns the process exit code.

    0: stopped by a signal or by the kernel's own ``request_shutdown()``;
    1: gave up after too many crashes (or the kernel could not be started);
    2: another supervisor already runs on this data directory.
    Must run in the main thread (it installs signal handlers).
    """
    pid_file = PidFile(settings.data_dir)
    try:
        pid_file.acquire()
    except SupervisorAlreadyRunningError as exc:
        print(f"supervisor: {exc}", file=sys.stderr, flush=True)
        return EXIT_ALREADY_RUNNING
    except SymlinkRefusedError as exc:
        print(f"supervisor: {exc.strerror}", file=sys.stderr, flush=True)
        return EXIT_GAVE_UP
    try:
        close_logs = configure_logging(settings.data_dir, settings.logging.level)
    except SymlinkRefusedError as exc:
        print(f"supervisor: {exc.strerror}", file=sys.stderr, flush=True)
        pid_file.release()
        return EXIT_GAVE_UP
    try:
        argv = kernel_argv if kernel_argv is not None else default_kernel_argv(settings_file)
        local = settings.models.local_server
        server = None
        if local.start:  # the local model's server beside the kernel (ADR 0098)
            server = LocalServerKeeper(
                local.argv(),
                settings.data_dir,
                logging.getLogger(f"{SUPERVISOR_LOGGER}.local_model"),
                backoff_max_s=local.restart_backoff_max_s,
            )
        return Supervisor(settings.supervisor, settings.data_dir, argv, server).run()
    finally:
        close_logs()
        pid_file.release()


def default_kernel_argv(settings_file: Path | None) -> list[str]:
    """``python main.py [--settings FILE]``, the same interpreter and settings."""
    argv = [sys.executable, str(PROJECT_ROOT / "main.py")]
    if settings_file is not None:
        argv += ["--settings", str(settings_file)]
    return argv


class Supervisor:
    """Spawns the kernel, restarts it, and stops it on SIGTERM/SIGINT/SIGHUP; ``server``
    (the local model's, when set up) runs from before the kernel's first start until
    after its last stop, across the kernel's restarts."""

    def __init__(
        self,
        settings: SupervisorSettings,
        data_dir: Path,
        argv: Sequence[str],
        server: LocalServerKeeper | None = None,
    ) -> None:
        self._settings = settings
        self._data_dir = data_dir
        self._argv = list(argv)
        self._events: queue.SimpleQueue[_Event] = queue.SimpleQueue()
        self._policy = CrashPolicy(settings)
        self._restarts = RestartRequestPolicy(settings)
        self._output = logging.getLogger(KERNEL_OUTPUT_LOGGER)
        self._current: KernelProcess | None = None
        self._server = server

    def run(self) -> int:
        previous = self._install_signal_handlers()
        try:
            _log.info("supervisor started (pid %d, data dir %s)", os.getpid(), self._data_dir)
            stale = take_restart_request(self._data_dir)
            if stale is not None:
                _log.info("dropped a restart request left from before (%s)", stale)
            if self._server is not None:
                self._server.start()
            return self._loop()
        except BaseException:
            self._kill_current()  # a bug here must not leave a kernel behind
            raise
        finally:
            if self._server is not None:
                self._server.stop()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _loop(self) -> int:
        while True:
            kernel = self._spawn()
            if kernel is None:
                return EXIT_GAVE_UP
            signum = self._wait_for_exit(kernel)
            if signum is not None:
                self._stop(kernel, signum)
                return EXIT_OK
            ran_for = time.monotonic() - kernel.started_at
            returncode = kernel.reap()
            request = take_restart_request(self._data_dir)
            if returncode == EXIT_CLEAN and request is not None:
                delay = self._restart_delay(request)
                if delay == 0:
                    continue
            elif returncode == EXIT_CLEAN:
                _log.info("kernel shut down (exit code 0): supervisor exits")
                return EXIT_OK
            else:
                crash_delay = self._count_crash(kernel, returncode, ran_for, request)
                if crash_delay is None:
                    return EXIT_GAVE_UP
                delay = crash_delay
            signum = self._sleep(delay)
            if signum is not None:
                _log.info("received %s while waiting to restart: supervisor exits", _name(signum))
                return EXIT_OK

    def _restart_delay(self, request: str) -> float:
        """Log a requested restart; the backoff before it when requests come too fast."""
        verdict = self._restarts.record_request(time.monotonic())
        if verdict.delay_s == 0:
            _log.info("kernel restart requested (%s): starting a new kernel now", request)
        else:
            s = self._settings
            _log.warning(
                "kernel restart requested (%s): %d requests in %g s (more than %d); "
                "restart in %g s to break a restart loop",
                request,
                verdict.crashes_in_window,
                s.restart_window_s,
                s.quick_restarts,
                verdict.delay_s,
            )
        return verdict.delay_s

    def _spawn(self) -> KernelProcess | None:
        env = {**os.environ, SUPERVISED_ENV: "1", "PYTHONUNBUFFERED": "1"}
        try:
            kernel = KernelProcess(self._argv, env, self._output, self._on_kernel_exit)
        except OSError as exc:
            _log.critical("cannot start the kernel %s: %s", self._argv, exc)
            return None
        _log.info("kernel started (pid %d): %s", kernel.pid, " ".join(self._argv))
        self._current = kernel
        return kernel

    def _kill_current(self) -> None:
        if self._current is not None:
            self._current.kill_group()
            self._current.reap()

    def _on_kernel_exit(self, pid: int) -> None:
        self._events.put(_KernelExited(pid))

    def _count_crash(
        self, kernel: KernelProcess, returncode: int, ran_for: float, request: str | None
    ) -> float | None:
        """Log the crash; the delay before the next start, or ``None`` to give up."""
        s = self._settings
        verdict = self._policy.record_crash(time.monotonic(), ran_for)
        summary = summarize_crash(kernel.tail.lines(), returncode)
        if request is not None:
            _log.warning("the crashed kernel had requested a restart (%s)", request)
        if verdict.give_up:
            _log.critical(
                "giving up after %d crashes in %g s; last error: %s",
                verdict.crashes_in_window,
                s.crash_window_s,
                summary,
            )
            return None
        _log.error(
            "kernel crashed after %.1f s: %s; crash %d in %g s (giving up at %d); restart in %g s",
            ran_for,
            summary,
            verdict.crashes_in_window,
            s.crash_window_s,
            s.max_crashes,
            verdict.delay_s,
        )
        return verdict.delay_s

    def _stop(self, kernel: KernelProcess, signum: int) -> None:
        """Forward SIGTERM, wait ``stop_timeout_s``, then kill the kernel's group."""
        timeout = self._settings.stop_timeout_s
        _log.info(
            "received %s: stopping the kernel (pid %d, waiting up to %g s)",
            _name(signum),
            kernel.pid,
            timeout,
        )
        kernel.terminate()
        if not self._await_exit(kernel, time.monotonic() + timeout):
            kernel.kill_group()
        returncode = kernel.reap()
        take_restart_request(self._data_dir)
        _log.info("kernel stopped (%s): supervisor exits", describe_exit(returncode))

    def _await_exit(self, kernel: KernelProcess, deadline: float) -> bool:
        """True when the kernel exited by ``deadline``; False on timeout or a second signal."""
        while True:
            event = self._next_event(deadline - time.monotonic())
            if event is None:
                _log.warning("kernel (pid %d) did not stop in time: killing it", kernel.pid)
                return False
            if isinstance(event, _StopSignal):
                _log.warning("received %s again: killing the kernel now", _name(event.signum))
                return False
            if event.pid == kernel.pid:
                return True

    def _wait_for_exit(self, kernel: KernelProcess) -> int | None:
        """Block until the kernel exits (``None``) or a stop signal arrives (its number)."""
        while True:
            event = self._next_event(None)
            if isinstance(event, _StopSignal):
                return event.signum
            if isinstance(event, _KernelExited) and event.pid == kernel.pid:
                return None

    def _sleep(self, seconds: float) -> int | None:
        """Wait out a backoff; a stop signal cuts it short (its number is returned)."""
        deadline = time.monotonic() + seconds
        while True:
            event = self._next_event(deadline - time.monotonic())
            if event is None:
                return None
            if isinstance(event, _StopSignal):
                return event.signum

    def _next_event(self, timeout: float | None) -> _Event | None:
        if timeout is not None and timeout <= 0:
            return None
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _install_signal_handlers(self) -> dict[int, Any]:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            self._events.put(_StopSignal(signum))

        previous: dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
                continue  # started under nohup: keep ignoring hang-ups
            previous[signum] = signal.signal(signum, on_signal)
        return previous


def _name(signum: int) -> str:
    return signal.Signals(signum).name
