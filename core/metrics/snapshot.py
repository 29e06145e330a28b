"""The snapshot file ``<data>/metrics.prom``, and asking a running kernel.

The kernel rewrites the snapshot every ``metrics.snapshot_interval_s`` and
once more at stop, atomically (temp file, fsync, rename; never through a
symbolic link), so ``main.py metrics`` can print a running kernel's numbers
— or the last ones of a stopped kernel — with no port open. When
``metrics.listen`` is set it asks the kernel's ``/metrics`` first. Light:
no kernel, SDK or metrics library is imported here.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from core.config import listen_address

__all__ = ["SNAPSHOT_FILE", "fetch_live", "read_snapshot", "write_snapshot"]

SNAPSHOT_FILE = "metrics.prom"


def read_snapshot(data_dir: Path) -> tuple[bytes, float] | None:
    """The last snapshot and its age in seconds, or ``None`` when there is none."""
    path = data_dir / SNAPSHOT_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        age = time.time() - os.fstat(fh.fileno()).st_mtime
        return fh.read(), max(age, 0.0)


def fetch_live(listen: str, timeout_s: float = 3.0) -> bytes | None:
    """``GET http://<listen>/metrics`` of a running kernel, or ``None`` if none answers."""
    host, port = listen_address(listen)
    host = f"[{host}]" if ":" in host else host
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout_s) as resp:
            body: bytes = resp.read()
            return body
    except (OSError, urllib.error.URLError):
        return None


def write_snapshot(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (blocking: run it in a thread)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, flags, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
