"""One supervisor per data directory, enforced with ``flock`` on a pid file.

The lock dies with its process, so a pid file left by a supervisor that was
killed is simply taken over; the pid written inside is only for people (and
for the refusal message).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from core.runtime import open_nofollow
from core.runtime.errors import HearthError

PID_FILE = "supervisor.pid"


class SupervisorAlreadyRunningError(HearthError):
    """Another live supervisor holds the pid file of this data directory."""

    def __init__(self, path: Path, pid: str) -> None:
        self.path = path
        self.pid = pid
        super().__init__(
            f"another supervisor (pid {pid or 'unknown'}) is already running for data dir "
            f"{path.parent} (lock held on {path}); stop it first, or give this one "
            f"another paths.data"
        )


class PidFile:
    """Held from ``acquire()`` until ``release()`` (or until this process dies)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / PID_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Lock the file and write our pid, or raise ``SupervisorAlreadyRunningError``
        (``SymlinkRefusedError`` when the pid file is a symbolic link)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", errors="replace").strip()
            os.close(fd)
            raise SupervisorAlreadyRunningError(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        """Empty the file and drop the lock (the file stays: unlinking would race)."""
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None
