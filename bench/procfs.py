"""Readings of a process's memory from ``/proc``, shared by the benches.

One reader of ``/proc/PID/status`` for every bench that reports resident
memory (``VmRSS``), its private part (``RssAnon``) or its peak (``VmHWM``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["status_mb"]


def status_mb(pid: int | str = "self", field: str = "VmRSS") -> float:
    """``field`` of ``/proc/PID/status`` in MB (``pid`` ``"self"``: this process)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/{pid}/status has no {field}")
