"""Limits on a plugin host's whole process tree with Linux cgroups (v2, else v1).

Resource limits (``limits.py``) hold one process each; a plugin that starts
four children gets four times the memory. A cgroup holds the tree: memory
(RAM and swap together), the number of tasks, and a CPU share, all counted
for every process the host ever starts, and it lists every one of them so
the kernel can kill them all. One cgroup per host lives under
``<hierarchy>/hearth/<kernel pid>/<extension id>.<n>`` (``n`` counts the
hosts this kernel started, so a new host never shares a cgroup with a dying
one); cgroups of kernels that are gone are cleaned when the first host of a
new kernel is placed.

cgroup v2 is used when it is mounted, writable and offers ``memory``,
``pids`` and ``cpu``; otherwise the v1 hierarchies ``memory``, ``pids``,
``cpu`` and ``cpuacct``. ``detect`` says which, or why neither (then the
caller falls back to rlimits and the watchdog, loudly). Everything here is
blocking file I/O on cgroupfs: callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from core.extensions.isolation.host.limits import HostLimits

__all__ = ["CgroupSupport", "HostCgroup", "detect"]

PARENT = "hearth"
V2_CONTROLLERS = ("memory", "pids", "cpu")
V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuacct")
CFS_PERIOD_US = 100_000
MOUNTINFO = Path("/proc/self/mountinfo")
_serial = itertools.count(1)
STALE_TRIES = 40


@dataclass(frozen=True, slots=True)
class CgroupSupport:
    """Which cgroup version limits host trees here (``None``: neither), and why."""

    version: int | None
    detail: str
    roots: tuple[tuple[str, Path], ...] = ()  # controller -> hierarchy mount ("" for v2)

    @property
    def available(self) -> bool:
        return self.version is not None

    def root(self, controller: str) -> Path:
        """The mount holding ``controller`` (v2: the one unified mount)."""
        return dict(self.roots)["" if self.version == 2 else controller]


@functools.cache
def detect() -> CgroupSupport:
    """Find a usable cgroup version and create the Hearth parent in it; cached."""
    mounts = _cgroup_mounts()
    reasons: list[str] = []
    v2 = next((Path(point) for fstype, point, _ in mounts if fstype == "cgroup2"), None)
    if v2 is not None:
        offered = set(_read(v2 / "cgroup.controllers").split())
        missing = [c for c in V2_CONTROLLERS if c not in offered]
        if missing:
            reasons.append(f"cgroup2 at {v2} does not offer {', '.join(missing)}")
        else:
            error = _prepare_v2(v2)
            if error is None:
                return CgroupSupport(2, f"cgroup v2 at {v2}", (("", v2),))
            reasons.append(error)
    v1: dict[str, Path] = {}
    for fstype, point, options in mounts:
        for controller in V1_CONTROLLERS:
            if fstype == "cgroup" and controller in options:
                v1.setdefault(controller, Path(point))
    missing = [c for c in V1_CONTROLLERS if c not in v1]
    if missing:
        reasons.append(f"no cgroup v1 hierarchy for {', '.join(missing)}")
    else:
        for hierarchy in sorted(set(v1.values())):
            try:
                (hierarchy / PARENT).mkdir(exist_ok=True)
            except OSError as exc:
                reasons.append(f"cgroup v1 at {hierarchy} is not writable: {exc.strerror}")
                break
        else:
            names = ", ".join(V1_CONTROLLERS)
            return CgroupSupport(1, f"cgroup v1 ({names})", tuple(sorted(v1.items())))
    return CgroupSupport(None, "; ".join(reasons) or "no cgroup filesystem is mounted")


class HostCgroup:
    """The cgroup of one plugin host (one directory per v1 hierarchy, one for v2)."""

    def __init__(self, support: CgroupSupport, name: str) -> None:
        self.support = support
        self.name = name
        controllers = V2_CONTROLLERS if support.version == 2 else V1_CONTROLLERS
        self.dirs = {c: _kernel_dir(support.root(c)) / name for c in controllers}

    @property
    def path(self) -> str:
        """``hearth/<kernel pid>/<id>.<n>`` (the same in every hierarchy)."""
        return f"{PARENT}/{os.getpid()}/{self.name}"

    @classmethod
    def create(cls, support: CgroupSupport, ext_id: str, limits: HostLimits) -> HostCgroup:
        """Create a new cgroup for one host of ``ext_id`` with ``limits`` applied."""
        _clean_stale(support)
        group = cls(support, f"{ext_id}.{next(_serial)}")
        if any(d.exists() for d in group.dirs.values()):
            group.remove()  # left by an earlier kernel with this pid
        for directory in set(group.dirs.values()):
            directory.mkdir(parents=True, exist_ok=True)
        group._apply(limits)
        return group

    def _apply(self, limits: HostLimits) -> None:
        memory = limits.memory_mb * 1024 * 1024
        quota = limits.cpu_percent * CFS_PERIOD_US // 100
        d = self.dirs
        if self.support.version == 2:
            _write(d["memory"] / "memory.max", memory)
            _write(d["memory"] / "memory.swap.max", 0, optional=True)
            _write(d["pids"] / "pids.max", limits.pids_max)
            _write(d["cpu"] / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            return
        _write(d["memory"] / "memory.limit_in_bytes", memory)
        _write(d["memory"] / "memory.memsw.limit_in_bytes", memory, optional=True)
        _write(d["pids"] / "pids.max", limits.pids_max)
        _write(d["cpu"] / "cpu.cfs_period_us", CFS_PERIOD_US)
        _write(d["cpu"] / "cpu.cfs_quota_us", quota)

    def add(self, pid: int) -> None:
        """Move process ``pid`` (and what it starts from now on) into this cgroup."""
        for directory in set(self.dirs.values()):
            _write(directory / "cgroup.procs", pid)

    def cpu_seconds(self) -> float:
        """CPU time used by every process that ever ran in this cgroup."""
        if self.support.version == 2:
            for line in _read(self.dirs["cpu"] / "cpu.stat").splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            return 0.0
        return int(_read(self.dirs["cpuacct"] / "cpuacct.usage") or 0) / 1e9

    def memory_bytes(self) -> int:
        """RAM (and tmpfs pages) charged to the tree now."""
        name = "memory.current" if self.support.version == 2 else "memory.usage_in_bytes"
        return int(_read(self.dirs["memory"] / name) or 0)

    def oom_kills(self) -> int:
        """Processes the out-of-memory killer has killed in this cgroup so far."""
        name = "memory.events" if self.support.version == 2 else "memory.oom_control"
        for line in _read(self.dirs["memory"] / name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> set[int]:
        """Every process in the cgroup (pids as the kernel sees them)."""
        found: set[int] = set()
        for directory in set(self.dirs.values()):
            found |= {int(p) for p in _read(directory / "cgroup.procs").split()}
        return found

    def kill_all(self) -> None:
        """SIGKILL every process in the cgroup (``cgroup.kill`` on v2, one by one on v1)."""
        kill_file = self.dirs["pids"] / "cgroup.kill"
        if self.support.version == 2 and kill_file.exists():
            _write(kill_file, 1, optional=True)
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """Kill what is left and remove the cgroup; ``False`` while processes still exit."""
        self.kill_all()
        gone = True
        for directory in set(self.dirs.values()):
            try:
                directory.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                gone = False
        if gone:  # the kernel's own directory goes with its last host
            for directory in {d.parent for d in self.dirs.values()}:
                with contextlib.suppress(OSError):
                    directory.rmdir()
        return gone


def _kernel_dir(root: Path) -> Path:
    return root / PARENT / str(os.getpid())


def _prepare_v2(root: Path) -> str | None:
    """Create ``hearth/<pid>`` and hand the controllers down to it; ``None`` when it worked."""
    enable = " ".join(f"+{c}" for c in V2_CONTROLLERS)
    try:
        for directory in (root, root / PARENT, _kernel_dir(root)):
            directory.mkdir(exist_ok=True)
            _write(directory / "cgroup.subtree_control", enable)
    except OSError as exc:
        return f"cgroup2 at {root} cannot be used: {exc.strerror or exc}"
    return None


def _clean_stale(support: CgroupSupport) -> None:
    """Remove the cgroups of kernels that are no longer running (and kill what is in them)."""
    for _, root in support.roots:
        parent = root / PARENT
        with contextlib.suppress(OSError):
            for kernel_dir in parent.iterdir():
                if not kernel_dir.is_dir() or _alive(kernel_dir.name):
                    continue
                for host_dir in (d for d in kernel_dir.iterdir() if d.is_dir()):
                    for _ in range(STALE_TRIES):  # killed processes take a moment to leave
                        pids = _read(host_dir / "cgroup.procs").split()
                        if not pids:
                            break
                        for pid in pids:
                            with contextlib.suppress(OSError):
                                os.kill(int(pid), signal.SIGKILL)
                        time.sleep(0.05)
                    with contextlib.suppress(OSError):
                        host_dir.rmdir()
                with contextlib.suppress(OSError):
                    kernel_dir.rmdir()


def _alive(name: str) -> bool:
    if not name.isdigit():
        return True  # not ours to judge
    return Path(f"/proc/{name}").exists()


def _cgroup_mounts() -> list[tuple[str, str, set[str]]]:
    """``(fstype, mount point, super options)`` of every cgroup mount."""
    found = []
    for line in _read(MOUNTINFO).splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            point = fields[4].replace("\\040", " ")
            found.append((tail[0], point, set(tail[2].split(","))))
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: object, *, optional: bool = False) -> None:
    try:
        with open(path, "w") as file:
            file.write(str(value))
    except OSError:
        if not optional:
            raise
