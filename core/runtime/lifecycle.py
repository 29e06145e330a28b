"""The contract between a kernel process and the supervisor that runs it.

Both sides import this module, so the file name and exit conventions live in
one place:

- The supervisor starts the kernel with ``HEARTH_SUPERVISED=1`` (the kernel
  then runs no CLI channel) and stdin closed.
- ``request_shutdown()``: the kernel stops gracefully and exits with
  ``EXIT_CLEAN``; the supervisor then exits 0 too.
- ``request_restart()``: the kernel calls ``write_restart_request`` and then
  stops exactly as for a shutdown. Exit ``EXIT_CLEAN`` with a request file
  present means "start me again now" (no backoff, no crash counted).
- Any other exit (non-zero code, killed by a signal) is a crash.
- SIGTERM to the kernel is a graceful shutdown (exit ``EXIT_CLEAN``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from core.runtime.datadir import SymlinkRefusedError, open_nofollow

RESTART_REQUEST_FILE = "restart_requested"
SUPERVISED_ENV = "HEARTH_SUPERVISED"
EXIT_CLEAN = 0


def is_supervised() -> bool:
    """True when this process is a kernel started by ``main.py daemon``."""
    return os.environ.get(SUPERVISED_ENV) == "1"


def restart_request_path(data_dir: Path) -> Path:
    """The request file lives directly in ``paths.data``."""
    return data_dir / RESTART_REQUEST_FILE


def write_restart_request(data_dir: Path, reason: str) -> None:
    """Record a restart request atomically (a crash never leaves half a file).

    The temporary file is created exclusively and without following links;
    the rename replaces a planted link instead of writing through it.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = restart_request_path(data_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(reason.strip() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def take_restart_request(data_dir: Path) -> str | None:
    """Read and delete the request: its reason, or ``None`` when there is none.

    A symlink in its place is removed unread (``SymlinkRefusedError`` is
    never raised here: a planted link must not stop the supervisor).
    """
    path = restart_request_path(data_dir)
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except SymlinkRefusedError:
        path.unlink(missing_ok=True)
        return None
    with os.fdopen(fd, encoding="utf-8") as fh:
        reason = fh.read(64 * 1024).strip()
    path.unlink(missing_ok=True)
    return reason
