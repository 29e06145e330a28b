"""The supervisor (`main.py daemon`, SPEC §5) against fake kernels, in subprocesses.

Each test runs the real supervisor as its own process with a fake kernel
(`tests/fixtures/kernels/fake_kernel.py`), then kills, signals and inspects
real processes. Waits poll a condition with a deadline.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TEST_ISOLATION, grant_all
from core.config import SupervisorSettings
from core.runtime import restart_request_path, take_restart_request, write_restart_request
from core.supervisor.crashlog import summarize_crash
from core.supervisor.policy import CrashPolicy, RestartRequestPolicy
from support.kernel_process import alive

ROOT = Path(__file__).resolve().parents[2]
FAKE_KERNEL = ROOT / "tests" / "fixtures" / "kernels" / "fake_kernel.py"
RUN_SUPERVISOR = (
    "import sys; from pathlib import Path; from core.config.settings import load_settings; "
    "from core.supervisor import run_supervisor; f = Path(sys.argv[1]); "
    "sys.exit(run_supervisor(load_settings(f), f, kernel_argv=sys.argv[2:]))"
)


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@dataclass
class Start:
    pid: int
    at: float
    line: str


@dataclass
class Daemon:
    """A supervisor process running a fake kernel on its own data dir."""

    proc: subprocess.Popen[bytes]
    data: Path
    stderr_path: Path

    def starts(self) -> list[Start]:
        path = self.data / "starts.txt"
        lines = path.read_text().splitlines() if path.exists() else []
        return [Start(int(ln.split()[0]), float(ln.split()[1]), ln) for ln in lines]

    def wait_starts(self, count: int, timeout: float = 10.0) -> list[Start]:
        def started() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"supervisor exited early; stderr:\n{self.stderr()}")
            return len(self.starts()) >= count

        wait_for(started, timeout, f"{count} kernel start(s)")
        return self.starts()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_exit(self, timeout: float = 15.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"supervisor still running; stderr:\n{self.stderr()}") from None


def write_settings(tmp_path: Path, **supervisor: float) -> Path:
    lines = [
        "paths:",
        f"  data: {tmp_path / 'data'}",
        f"  extensions: {tmp_path / 'extensions'}",
        "isolation:",
        f"  default: {TEST_ISOLATION['default']}",
    ]
    if supervisor:
        lines += ["supervisor:", *(f"  {key}: {value}" for key, value in supervisor.items())]
    path = tmp_path / "settings.yaml"
    path.write_text("\n".join(lines) + "\n")
    (tmp_path / "data").mkdir(exist_ok=True)
    return path


def spawn_supervisor(settings: Path, mode: str, name: str = "supervisor") -> Daemon:
    data = settings.parent / "data"
    stderr_path = settings.parent / f"{name}.stderr"
    argv = [sys.executable, "-c", RUN_SUPERVISOR, str(settings)]
    argv += [sys.executable, str(FAKE_KERNEL), mode, str(data)]
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stderr=err)
    return Daemon(proc, data, stderr_path)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    """Supervisors started by a test; anything still running is killed afterwards."""
    started: list[Daemon] = []
    yield started
    for daemon in started:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait()
        for start in daemon.starts():
            if alive(start.pid):
                os.killpg(start.pid, signal.SIGKILL)


def start(daemons: list[Daemon], settings: Path, mode: str) -> Daemon:
    daemon = spawn_supervisor(settings, mode)
    daemons.append(daemon)
    return daemon


# ----------------------------------------------------------------- processes


def test_killed_kernel_is_back_within_the_backoff(tmp_path: Path, daemons: list[Daemon]) -> None:
    daemon = start(daemons, write_settings(tmp_path, backoff_initial_s=0.3), "serve")
    first = daemon.wait_starts(1)[0]
    assert "supervised=1 stdin=eof" in first.line
    killed_at = time.time()
    os.kill(first.pid, signal.SIGKILL)

    second = daemon.wait_starts(2)[1]
    assert second.pid != first.pid and alive(second.pid)
    assert 0.3 <= second.at - killed_at < 5.0
    assert daemon.proc.poll() is None
    wait_for(lambda: "killed by signal SIGKILL" in daemon.stderr(), 5, "the crash logged")

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    assert not alive(second.pid)


def test_kernel_crashing_on_every_start_backs_off_then_gives_up(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    settings = write_settings(
        tmp_path, backoff_initial_s=0.2, backoff_max_s=10, max_crashes=4, crash_window_s=60
    )
    daemon = start(daemons, settings, "crash")

    assert daemon.wait_exit(30) == 1
    starts = daemon.starts()
    assert len(starts) == 4
    gaps = [b.at - a.at for a, b in itertools.pairwise(starts)]
    for gap, backoff in zip(gaps, [0.2, 0.4, 0.8], strict=True):
        assert gap >= backoff * 0.95, gaps
    assert gaps[2] > gaps[0]
    stderr = daemon.stderr()
    assert "giving up after 4 crashes in 60 s; last error: ext.boom: start() failed" in stderr
    assert "RuntimeError: boom" in stderr.splitlines()[-1]
    log = (daemon.data / "logs" / "kernel.log").read_text()
    assert "ERROR ext.boom: start() failed" in log and "giving up" in log


def test_restart_request_starts_a_new_kernel_without_counting_a_crash(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    # One crash would end the supervisor, and a crash backoff would take 30 s.
    settings = write_settings(tmp_path, max_crashes=1, backoff_initial_s=30)
    daemon = start(daemons, settings, "restart_once")

    first, second = daemon.wait_starts(2)[:2]
    assert second.at - first.at < 5.0
    assert alive(second.pid) and daemon.proc.poll() is None
    assert not restart_request_path(daemon.data).exists()
    wait_for(lambda: "fake kernel wants a restart" in daemon.stderr(), 5, "the restart logged")

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    assert len(daemon.starts()) == 2


def test_a_restart_loop_is_slowed_by_the_crash_backoff(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    # a kernel whose extension calls request_restart() in start(): two quick
    # restarts are allowed, then each waits the doubling backoff
    settings = write_settings(
        tmp_path, quick_restarts=2, restart_window_s=60, backoff_initial_s=0.4, max_crashes=1
    )
    daemon = start(daemons, settings, "restart_always")

    starts = daemon.wait_starts(5, timeout=20)[:5]
    gaps = [b.at - a.at for a, b in itertools.pairwise(starts)]
    assert gaps[2] >= 0.4 * 0.95 and gaps[3] >= 0.8 * 0.95, gaps
    assert daemon.proc.poll() is None  # requests are never counted as crashes
    wait_for(
        lambda: "3 requests in 60 s (more than 2); restart in 0.4 s" in daemon.stderr(),
        5,
        "the backoff explained",
    )
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0


def test_restart_requests_back_off_only_when_they_come_fast() -> None:
    policy = RestartRequestPolicy(
        SupervisorSettings(
            quick_restarts=3, restart_window_s=60, backoff_initial_s=1, backoff_max_s=5
        )
    )
    delays = [policy.record_request(now=float(i)).delay_s for i in range(7)]
    assert delays == [0, 0, 0, 1, 2, 4, 5]
    assert policy.record_request(now=1_000.0).delay_s == 0


def test_stop_signal_during_a_backoff_ends_the_wait(tmp_path: Path, daemons: list[Daemon]) -> None:
    daemon = start(daemons, write_settings(tmp_path, backoff_initial_s=30), "crash")
    daemon.wait_starts(1)
    wait_for(lambda: "restart in 30 s" in daemon.stderr(), 10, "the crash logged")

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit(5) == 0
    assert len(daemon.starts()) == 1


def test_kernel_shutdown_with_exit_0_ends_the_supervisor(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    daemon = start(daemons, write_settings(tmp_path), "shutdown")
    assert daemon.wait_exit() == 0
    assert len(daemon.starts()) == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stop_signal_stops_the_kernel_gracefully(
    tmp_path: Path, daemons: list[Daemon], signum: signal.Signals
) -> None:
    daemon = start(daemons, write_settings(tmp_path), "serve")
    kernel = daemon.wait_starts(1)[0]

    daemon.proc.send_signal(signum)
    assert daemon.wait_exit() == 0
    assert (daemon.data / "stops.txt").read_text().split() == [str(kernel.pid)]
    assert not alive(kernel.pid)


def test_kernel_stops_gracefully_when_the_supervisor_is_killed(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    daemon = start(daemons, write_settings(tmp_path), "serve")
    kernel = daemon.wait_starts(1)[0]

    daemon.proc.kill()  # SIGKILL: the supervisor gets no chance to clean up
    daemon.proc.wait()
    wait_for(lambda: not alive(kernel.pid), 10, "the orphaned kernel to stop")
    assert (daemon.data / "stops.txt").read_text().split() == [str(kernel.pid)]


def test_sigterm_kills_a_stuck_kernel_and_its_children(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    daemon = start(daemons, write_settings(tmp_path, stop_timeout_s=0.5), "stubborn")
    kernel = daemon.wait_starts(1)[0]
    grandchild = int((daemon.data / "grandchild.pid").read_text())
    assert alive(grandchild)

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0
    wait_for(lambda: not alive(kernel.pid) and not alive(grandchild), 5, "no process left")
    assert "did not stop in time" in daemon.stderr()


def test_second_supervisor_on_the_same_data_dir_is_refused(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    settings = write_settings(tmp_path)
    first = start(daemons, settings, "serve")
    first.wait_starts(1)

    second = spawn_supervisor(settings, "serve", name="second")
    daemons.append(second)
    assert second.wait_exit() == 2
    message = second.stderr()
    assert f"pid {first.proc.pid}" in message and str(first.data) in message
    assert first.proc.poll() is None and len(first.starts()) == 1

    first.proc.send_signal(signal.SIGTERM)
    assert first.wait_exit() == 0


def test_stale_pid_file_is_taken_over(tmp_path: Path, daemons: list[Daemon]) -> None:
    settings = write_settings(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "data" / "supervisor.pid").write_text(f"{dead.pid}\n")

    daemon = start(daemons, settings, "serve")
    daemon.wait_starts(1)
    assert (daemon.data / "supervisor.pid").read_text().strip() == str(daemon.proc.pid)
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.wait_exit() == 0


# ------------------------------------------------------------------ pure rules


def test_backoff_doubles_is_capped_and_resets_after_a_healthy_run() -> None:
    policy = CrashPolicy(
        SupervisorSettings(
            max_crashes=100, backoff_initial_s=1, backoff_max_s=5, healthy_reset_s=600
        )
    )
    delays = [policy.record_crash(now=float(i), ran_for_s=1).delay_s for i in range(5)]
    assert delays == [1, 2, 4, 5, 5]
    assert policy.record_crash(now=10_000, ran_for_s=600).delay_s == 1


def test_only_crashes_inside_the_window_count_towards_giving_up() -> None:
    policy = CrashPolicy(SupervisorSettings(max_crashes=3, crash_window_s=300))
    assert not policy.record_crash(now=0, ran_for_s=1).give_up
    assert not policy.record_crash(now=200, ran_for_s=1).give_up
    assert not policy.record_crash(now=400, ran_for_s=1).give_up  # the crash at 0 expired
    verdict = policy.record_crash(now=450, ran_for_s=1)
    assert verdict.give_up and verdict.crashes_in_window == 3


def test_crash_summary_names_the_logger_and_the_exception() -> None:
    lines = [
        "2026-11-22 10:00:00,001 INFO core.kernel.runner: kernel running",
        "2026-11-22 10:00:01,002 ERROR ext.weather: start() failed",
        "Traceback (most recent call last):",
        '  File "weather.py", line 3, in start',
        "RuntimeError: boom",
    ]
    assert summarize_crash(lines, 1) == (
        "ext.weather: start() failed [RuntimeError: boom] (exit code 1)"
    )
    killed = summarize_crash(["no errors here"], -9)
    assert killed == "no error was logged (killed by signal SIGKILL)"


def test_restart_request_file_round_trip(tmp_path: Path) -> None:
    assert take_restart_request(tmp_path) is None
    write_restart_request(tmp_path, "new extension installed")
    assert take_restart_request(tmp_path) == "new extension installed"
    assert not restart_request_path(tmp_path).exists()


# --------------------------------------------------------- with the real kernel

BEACON_MANIFEST = """\
id: beacon
name: Beacon
version: "1.0.0"
entrypoint: main:Beacon
description: Appends a line to its data dir on every start and stop.
"""

BEACON_CODE = """\
import os


class Beacon:
    async def initialize(self, context):
        self._log = context.data_dir / "lifecycle.txt"

    async def start(self):
        self._write("start")

    async def stop(self):
        self._write("stop")

    async def destroy(self):
        pass

    def health_check(self):
        return True

    def _write(self, what):
        with self._log.open("a") as fh:
            fh.write(f"{what} {os.getpid()}\\n")
"""


@pytest.mark.skipif(not (ROOT / "main.py").exists(), reason="main.py daemon not written yet")
def test_real_kernel_is_restarted_after_sigkill_and_stopped_by_sigterm(tmp_path: Path) -> None:
    beacon = tmp_path / "extensions" / "beacon"
    beacon.mkdir(parents=True)
    (beacon / "manifest.yaml").write_text(BEACON_MANIFEST)
    (beacon / "main.py").write_text(BEACON_CODE)
    settings = write_settings(tmp_path, backoff_initial_s=0.2)
    grant_all(tmp_path / "extensions", tmp_path / "data")
    with settings.open("a") as fh:
        fh.write("models:\n  default: null\n")
    lifecycle = tmp_path / "data" / "extensions" / "beacon" / "lifecycle.txt"

    def events() -> list[tuple[str, int]]:
        lines = lifecycle.read_text().splitlines() if lifecycle.exists() else []
        return [(ln.split()[0], int(ln.split()[1])) for ln in lines]

    def starts() -> list[int]:
        return [pid for what, pid in events() if what == "start"]

    stderr_path = tmp_path / "daemon.stderr"
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "main.py"), "daemon", "--settings", str(settings)],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_for(lambda: starts() or proc.poll() is not None, 60, "the extension's first start")
        assert proc.poll() is None, stderr_path.read_text()
        first = starts()[0]
        os.kill(first, signal.SIGKILL)

        wait_for(lambda: len(starts()) >= 2, 60, "the extension started by a new kernel")
        second = starts()[1]
        assert second != first and alive(second)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, stderr_path.read_text()
        assert not alive(second)
        assert ("stop", second) in events()  # the kernel stopped its extensions cleanly
        log = (tmp_path / "data" / "logs" / "kernel.log").read_text()
        assert "killed by signal SIGKILL" in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in starts():
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
