"""Spawn, watch and kill one plugin host process (kernel side).

The channel is a Unix socket pair: the host gets one end as an inherited
file descriptor, so its stdout stays free (the host sends its stdout and
stderr to a pipe whose lines land in the kernel log, rate-limited and
escaped). Exit is detected with
a pidfd, not by waiting for the pipes to close: an orphaned grandchild that
still holds them must never block the kernel.

With a cgroup, the host starts behind a gate: ``/bin/sh`` waits for one line
on its stdin, which the kernel writes only after moving that process into
the host's cgroup; then it ``exec``s bwrap (or Python). Everything the plugin
ever runs is therefore born inside the cgroup (ADR 0010).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from core.config import PROJECT_ROOT
from core.extensions.isolation.kernel.watchdog import HostGuard
from core.extensions.isolation.protocol.ratelimit import LogLimiter
from core.runtime import escape_control

BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from core.extensions.isolation.host.plugin_host import main; main(int(sys.argv[2]))"
)
GATE = ("/bin/sh", "-c", 'read go || exit 111; exec "$@" </dev/null', "hearth-gate")
MAX_LOG_LINE = 4096
STREAM_LIMIT = 1024 * 1024


class HostProcess:
    """A running host: its RPC streams, its exit, its log lines."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        log_fd: int,
        logger: logging.Logger,
        confined: bool,
        guard: HostGuard | None = None,
    ) -> None:
        self.popen = popen
        self.guard = guard
        self.reader = reader
        self.writer = writer
        self.confined = confined
        self.started_at = time.monotonic()
        self.kill_reason: str | None = None
        self.closing = False
        self._logger = logger
        self.output_limiter = LogLimiter(logger, "lines of plugin host output")
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._poller: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._released: asyncio.Task[None] | None = None
        if guard is not None:
            self._watchdog = asyncio.create_task(
                guard.watch(popen.pid, self.kill), name=f"host-watchdog:{popen.pid}"
            )
        self._watch_exit()
        self._log_task = asyncio.create_task(
            self._forward_log(log_fd), name=f"host-log:{popen.pid}"
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return not self._exited.done()

    @classmethod
    async def spawn(
        cls,
        prefix: Sequence[str],
        *,
        cwd: str,
        env: dict[str, str],
        logger: logging.Logger,
        guard: HostGuard | None = None,
        code: str = BOOTSTRAP,
    ) -> HostProcess:
        """Start ``[*prefix, python, -I, -B, -c, code, root, fd]`` in a new session.

        With a ``guard``, its cgroup is created first and the host is moved
        into it before it may run (``GATE``); its watchdog runs while it lives.
        """
        if guard is not None:
            await guard.prepare()
        gated = guard is not None and guard.cgroup is not None
        kernel_end, host_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_r, log_w = os.pipe()
        argv = [*(GATE if gated else ()), *prefix, sys.executable, "-I", "-B", "-c", code]
        argv += [str(PROJECT_ROOT), str(host_end.fileno())]
        try:
            # On the loop thread on purpose: the host's PR_SET_PDEATHSIG follows the
            # thread that forked it, and a worker thread may exit. vfork keeps it fast.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv,
                stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
                stdout=log_w,
                stderr=log_w,
                pass_fds=(host_end.fileno(),),
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            kernel_end.close()
            os.close(log_r)
            if guard is not None:
                await guard.release()
            raise
        finally:
            host_end.close()
            os.close(log_w)
        try:
            if gated and guard is not None and popen.stdin is not None:
                await guard.place(popen.pid)
                popen.stdin.write(b"go\n")  # a pipe with room: does not block
                popen.stdin.close()
            reader, writer = await asyncio.open_unix_connection(sock=kernel_end, limit=STREAM_LIMIT)
        except BaseException:
            _kill_group(popen)
            os.close(log_r)
            kernel_end.close()
            if guard is not None:
                await guard.release()
            raise
        return cls(popen, reader, writer, log_r, logger, confined=bool(prefix), guard=guard)

    # ------------------------------------------------------------ exit

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.popen.pid)
        except OSError:
            self._poller = asyncio.create_task(self._poll_exit())
            return

        def on_ready() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._set_exited(self.popen.wait())

        loop.add_reader(pidfd, on_ready)

    async def _poll_exit(self) -> None:
        """Fallback without pidfds (old kernels): poll the exit status."""
        while (code := self.popen.poll()) is None:  # noqa: ASYNC110 - no event to wait on
            await asyncio.sleep(0.05)
        self._set_exited(code)

    def _set_exited(self, code: int) -> None:
        if self.guard is not None and self.kill_reason is None and code in (-9, 137):
            self.kill_reason = self.guard.death_cause()
        if not self._exited.done():
            self._exited.set_result(code)
        # Grandchildren still in the host's process group go with it (and its cgroup).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.writer.close()
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self.guard is not None and self._released is None and not self.guard.release_now():
            self._released = asyncio.create_task(self.guard.release())

    async def wait(self) -> int:
        """The exit status (``Popen.returncode``: negative for a signal)."""
        return await asyncio.shield(self._exited)

    def describe_exit(self) -> str:
        """``plugin host exited with signal 9`` / ``code 3`` (+ why the kernel killed it)."""
        code = self._exited.result() if self._exited.done() else None
        if code is None:
            return "plugin host is running"
        if code < 0:
            text = f"plugin host exited with signal {-code} ({_signal_name(-code)})"
        elif self.confined and code > 128:
            text = f"plugin host exited with signal {code - 128} ({_signal_name(code - 128)})"
        else:
            text = f"plugin host exited with code {code}"
        return f"{text}: {self.kill_reason}" if self.kill_reason else text

    # ------------------------------------------------------------ stopping

    def kill(self, reason: str) -> None:
        """SIGKILL the host and its process group (bwrap also takes its PID namespace)."""
        if self.alive:
            self.kill_reason = self.kill_reason or reason
            _kill_group(self.popen)

    async def close(self, grace_s: float) -> int:
        """Close the channel, give the host ``grace_s`` to exit, then kill it."""
        self.closing = True
        self.writer.close()
        try:
            async with asyncio.timeout(grace_s):
                code = await self.wait()
        except TimeoutError:
            self.kill(f"did not exit within {grace_s:g} s of being closed")
            code = await self.wait()
        await self._stop_log()
        if self._released is not None:
            await asyncio.shield(self._released)
        return code

    async def _stop_log(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.5):
                await asyncio.shield(self._log_task)
        self._log_task.cancel()

    # ------------------------------------------------------------ log

    async def _forward_log(self, fd: int) -> None:
        """Each line the host writes to stdout/stderr becomes one kernel log line
        (rate-limited: a flood is summarised when it ends or every few seconds)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=STREAM_LIMIT)
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
        )
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:  # a line longer than the limit: drop the buffered part
                    continue
                if not line:
                    return
                text = line.decode(errors="replace").rstrip()[:MAX_LOG_LINE]
                if text and self.output_limiter.allow():
                    self._logger.info("[host %d] %s", self.pid, escape_control(text))
        finally:
            self.output_limiter.flush()
            transport.close()


def _kill_group(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        popen.kill()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"
