"""Resource limits a plugin host sets on itself before importing the extension.

Hard limit = soft limit, so the extension cannot raise them again. These are
a second line of defence: ``RLIMIT_AS`` makes allocations raise
``MemoryError`` (which the plugin can catch) and ``RLIMIT_CPU`` does not stop
a sleeping plugin — the kernel's per-call deadline is what guarantees progress.
They are per process: the whole process tree of a host is held by its cgroup
and the kernel's watchdog (``cgroups.py``, ``watchdog.py``). ``RLIMIT_FSIZE``
caps any one file at the data quota, so a single write cannot fill the disk
between two of the watchdog's checks.
"""

from __future__ import annotations

import resource
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HostLimits:
    """The ``isolation`` limits of one host (``settings.yaml`` says what each one means)."""

    memory_mb: int = 512
    cpu_seconds: int = 600
    open_files: int = 256
    pids_max: int = 128
    cpu_percent: int = 100
    tmp_mb: int = 64
    data_quota_mb: int = 1024

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> HostLimits:
        return cls(**data)


def apply_limits(limits: HostLimits) -> None:
    """Set every limit (soft = hard) on the current process; no core dumps."""
    _set(resource.RLIMIT_AS, limits.memory_mb * 1024 * 1024)
    _set(resource.RLIMIT_CPU, limits.cpu_seconds)
    _set(resource.RLIMIT_NOFILE, limits.open_files)
    _set(resource.RLIMIT_FSIZE, limits.data_quota_mb * 1024 * 1024)
    _set(resource.RLIMIT_CORE, 0)


def _set(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY and value > hard:
        value = hard  # cannot raise past an inherited hard limit; keep the stricter one
    resource.setrlimit(which, (value, value))


def current_limits() -> dict[str, tuple[int, int]]:
    """The limits in force (for tests and ``doctor``-style reports)."""
    return {
        "as": resource.getrlimit(resource.RLIMIT_AS),
        "cpu": resource.getrlimit(resource.RLIMIT_CPU),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
        "fsize": resource.getrlimit(resource.RLIMIT_FSIZE),
    }
