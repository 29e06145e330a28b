"""Hold one plugin host's whole process tree to its limits (kernel side).

``HostGuard`` does three things around a host's life:

- before spawning, refuse to start when the data dir is over its quota, and
  create the host's cgroup (``cgroups.py``) unless cgroups cannot be used;
- right after spawning, while the host is still held at its start gate, move
  it into the cgroup, so nothing it ever runs is outside (see ADR 0010);
- while it runs, sample every ``watchdog_interval_s``: CPU time of the whole
  tree (threads and children, the cgroup's account or, without cgroups, every
  descendant in ``/proc``) against ``cpu_seconds``, the data dir against
  ``data_quota_mb`` (less often when walking it takes long), and, without
  cgroups, the tree's RAM and task count against ``memory_mb`` and
  ``pids_max``. A host over a limit is killed with
  a reason that names the setting; its extension goes ``error`` with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.extensions.isolation.host.limits import HostLimits
from core.extensions.isolation.kernel.cgroups import CgroupSupport, HostCgroup, detect
from core.extensions.isolation.protocol.errors import QuotaExceededError

__all__ = [
    "GuardConfig",
    "HostGuard",
    "TreeUsage",
    "cgroup_support",
    "data_dir_bytes",
    "tree_usage",
]

log = logging.getLogger("core.isolation")
MB = 1024 * 1024
QUOTA_SHARE = 0.1  # walking the data dir may take at most this share of the watchdog's time
RELEASE_TIMEOUT_S = 5.0
_warned: set[str] = set()


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """What one extension's hosts are held to."""

    ext_id: str
    data_dir: Path
    limits: HostLimits
    cgroups: str = "auto"
    interval_s: float = 1.0


@dataclass(frozen=True, slots=True)
class TreeUsage:
    """One sample of a process tree read from ``/proc``."""

    cpu_s: float
    rss_bytes: int
    tasks: int
    pids: tuple[int, ...] = ()


def cgroup_support(mode: str) -> CgroupSupport:
    """``detect()`` unless switched off with ``isolation.cgroups: none``."""
    if mode == "none":
        return CgroupSupport(None, "cgroups are switched off (isolation.cgroups: none)")
    return detect()


class HostGuard:
    """Cgroup and watchdog of one host process (a new guard for every spawn)."""

    def __init__(self, config: GuardConfig) -> None:
        self.config = config
        self.cgroup: HostCgroup | None = None
        self._baseline_s = 0.0

    async def prepare(self) -> None:
        """Before spawning: quota check, then the cgroup (or a loud fallback)."""
        config = self.config
        used = await asyncio.to_thread(data_dir_bytes, config.data_dir)
        if used > config.limits.data_quota_mb * MB:
            raise QuotaExceededError(
                config.ext_id, str(config.data_dir), used / MB, config.limits.data_quota_mb
            )
        support = await asyncio.to_thread(cgroup_support, config.cgroups)
        if not support.available:
            _warn_no_cgroups(support.detail)
            return
        self.cgroup = await asyncio.to_thread(
            HostCgroup.create, support, config.ext_id, config.limits
        )

    async def place(self, pid: int) -> None:
        """Move the gated host into its cgroup (before it runs anything of the plugin)."""
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.add, pid)
            self._baseline_s = await asyncio.to_thread(self.cgroup.cpu_seconds)

    async def watch(self, pid: int, kill: Callable[[str], None]) -> None:
        """Sample until a limit is crossed, then ``kill(reason)``; cancelled at host exit."""
        loop = asyncio.get_running_loop()
        next_walk, failed = 0.0, False
        while True:
            await asyncio.sleep(self.config.interval_s)
            started = loop.time()
            walk = started >= next_walk
            try:
                reason = await asyncio.to_thread(self.check, pid, walk)
            except Exception:  # a vanished cgroup, an unreadable /proc: keep watching
                if not failed:
                    log.exception("watchdog of isolated extension %s failed", self.config.ext_id)
                failed, reason = True, None
            if walk:  # a data dir with many files is walked less often
                next_walk = started + (loop.time() - started) / QUOTA_SHARE
            if reason is not None:
                log.error("isolated extension %s: %s", self.config.ext_id, reason)
                kill(reason)
                return

    def check(self, pid: int, with_quota: bool = True) -> str | None:
        """The first limit the host's tree is over (a kill reason), else ``None``."""
        limits = self.config.limits
        if self.cgroup is not None:
            cpu = self.cgroup.cpu_seconds() - self._baseline_s
        else:
            usage = tree_usage(pid)
            cpu = usage.cpu_s
            if usage.tasks > limits.pids_max:
                return (
                    f"killed: its processes ran {usage.tasks} tasks, over "
                    f"isolation.pids_max ({limits.pids_max})"
                )
            if usage.rss_bytes > limits.memory_mb * MB:
                return (
                    f"killed: its processes held {usage.rss_bytes / MB:.0f} MB of RAM, over "
                    f"isolation.memory_mb ({limits.memory_mb})"
                )
        if cpu > limits.cpu_seconds:
            return (
                f"killed: its processes used {cpu:.1f} CPU-seconds, over "
                f"isolation.cpu_seconds ({limits.cpu_seconds})"
            )
        if with_quota:
            used = data_dir_bytes(self.config.data_dir)
            if used > limits.data_quota_mb * MB:
                return (
                    f"killed: its data dir holds {used / MB:.1f} MB, over "
                    f"isolation.data_quota_mb ({limits.data_quota_mb})"
                )
        return None

    def death_cause(self) -> str | None:
        """Why a host died that the kernel did not kill: the OOM killer, if it was that."""
        if self.cgroup is None or not self.cgroup.oom_kills():
            return None
        return (
            "killed by the out-of-memory killer: its processes reached "
            f"isolation.memory_mb ({self.config.limits.memory_mb})"
        )

    def release_now(self) -> bool:
        """Kill what is left in the cgroup and remove it at once (cgroupfs: no disk I/O).

        ``False`` while processes are still exiting: then ``release`` retries.
        """
        return self.cgroup is None or self.cgroup.remove()

    async def release(self) -> None:
        """After the host exited: kill what is left in its cgroup and remove it."""
        if self.cgroup is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_TIMEOUT_S
        try:
            while not await asyncio.to_thread(self.cgroup.remove):
                if loop.time() > deadline:
                    log.warning("cgroup %s of a dead host could not be removed", self.cgroup.path)
                    return
                await asyncio.sleep(0.02)
        except RuntimeError as exc:  # the loop's executor is shutting down (process exit)
            log.debug("cgroup %s left for the next start: %s", self.cgroup.path, exc)


def tree_usage(pid: int) -> TreeUsage:
    """CPU time, RSS and tasks of ``pid`` and all its descendants (``/proc``)."""
    stats: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as file:
                    text = file.read()
            except OSError:
                continue
            fields = text[text.rfind(")") + 2 :].split()
            stats[int(entry.name)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tick, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    cpu_ticks = rss = tasks = 0
    todo, pids = [pid], []
    while todo:
        current = todo.pop()
        found = stats.get(current)
        if found is None:
            continue
        fields = found
        pids.append(current)
        # utime stime cutime cstime (reaped children count too), num_threads, rss
        cpu_ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
        tasks += int(fields[17])
        rss += int(fields[21]) * page
        todo += children.get(current, [])
    return TreeUsage(cpu_ticks / tick, rss, tasks, tuple(pids))


def data_dir_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (hard links once, symlinks not followed)."""
    total, seen = 0, set()
    todo = [str(path)]
    while todo:
        with contextlib.suppress(OSError), os.scandir(todo.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                        continue
                    stat = entry.stat(follow_symlinks=False)
                    if (stat.st_dev, stat.st_ino) not in seen:
                        seen.add((stat.st_dev, stat.st_ino))
                        total += stat.st_size
    return total


def _warn_no_cgroups(detail: str) -> None:
    if detail in _warned:
        return
    _warned.add(detail)
    log.warning(
        "PLUGIN HOST TREES ARE NOT LIMITED BY CGROUPS: %s. Each process of a host has its "
        "own rlimits, and the kernel's watchdog samples the tree (CPU, RAM, tasks, data dir) "
        "every isolation.watchdog_interval_s; a plugin can exceed them between two samples.",
        detail,
    )
