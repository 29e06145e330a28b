"""The layout of ``paths.data``: kernel files at the top, extension data below.

Extensions get ``<paths.data>/extensions/<id>/``, never a directory beside the
kernel's own files: an extension named ``logs`` once owned the directory the
supervisor writes ``kernel.log`` into, and could point that file anywhere.
Kernel files are opened without following symbolic links
(``open_nofollow``), and the names the kernel uses are reserved as extension
ids (``RESERVED_IDS``).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from core.extensions.contract_data import StoreLocation

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = [
    "EXTENSIONS_SUBDIR",
    "KERNEL_DATA_NAMES",
    "RESERVED_IDS",
    "SymlinkRefusedError",
    "extension_data_dir",
    "extension_storage",
    "migrate_extension_data",
    "open_nofollow",
    "refuse_symlinks",
]

log = logging.getLogger("core.datadir")

EXTENSIONS_SUBDIR = "extensions"

# Every name the kernel and the supervisor create directly in ``paths.data``
# (tests/test_hygiene_datadir.py checks the module constants that name them).
KERNEL_DATA_NAMES: frozenset[str] = frozenset(
    {
        EXTENSIONS_SUBDIR,
        "logs",  # core/supervisor/logs.py LOG_FILE
        "events.db",  # core/kernel/runner.py JOURNAL_FILE (+ -wal, -shm)
        "sessions.db",  # SESSIONS_FILE
        "schedules.db",  # SCHEDULES_FILE
        "state.db",  # STATE_FILE (extension state, core/state/)
        "metrics.prom",  # core/metrics/export.py SNAPSHOT_FILE
        "outbox.db",
        "grants.json",
        "grants",
        "restart_requested",  # core/lifecycle.py RESTART_REQUEST_FILE
        "supervisor.pid",  # core/supervisor/pidfile.py PID_FILE
        "tmp",
    }
)

# An extension id may not equal a kernel name or its stem (``events`` for
# ``events.db``), nor a few names kept for the kernel's own use.
RESERVED_IDS: frozenset[str] = frozenset(
    {name.split(".", 1)[0] for name in KERNEL_DATA_NAMES}
    | {"kernel", "core", "supervisor", "hearth", "system", "data"}
)


class SymlinkRefusedError(OSError):
    """A kernel file or directory is a symbolic link; the kernel never follows one."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP,
            f"refusing to open {path}: it is a symbolic link (kernel files are never "
            "followed; remove the link and start again)",
        )
        self.path = path


def extension_data_dir(data_root: Path, ext_id: str) -> Path:
    """``<paths.data>/extensions/<id>`` (not created here)."""
    return data_root / EXTENSIONS_SUBDIR / ext_id


def extension_storage(settings: Settings, ext_id: str) -> StoreLocation:
    """Where an in-process extension's databases go (``context.storage``, ADR 0035): its
    data dir (created), or the kernel's PostgreSQL with ``storage.backend: postgres``."""
    data_dir = extension_data_dir(settings.data_dir, ext_id)
    data_dir.mkdir(parents=True, exist_ok=True)
    storage = settings.storage
    if storage.backend == "postgres":
        return StoreLocation(data_dir, "postgres", storage.postgres_dsn, ext_id)
    return StoreLocation(data_dir, extension_id=ext_id)


def open_nofollow(path: Path, flags: int, mode: int = 0o644, *, below: Path | None = None) -> int:
    """``os.open`` that refuses a symlink (``SymlinkRefusedError``) instead of following it.

    ``O_NOFOLLOW`` covers the last component; with ``below``, every directory
    between ``below`` and the file is checked with ``lstat`` too, so a linked
    ``logs/`` directory is refused as well (``below`` itself may be a link:
    users link their data directory on purpose).
    """
    if below is not None:
        for parent in path.parents:
            if parent == below:
                break
            if parent.is_symlink():
                raise SymlinkRefusedError(parent)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno != errno.ENOENT and path.is_symlink()):
            raise SymlinkRefusedError(path) from None
        raise


def refuse_symlinks(*paths: Path) -> None:
    """``SymlinkRefusedError`` for the first of ``paths`` that is a symbolic link.

    For files opened by libraries that always follow links (SQLite): checked
    once before they are opened, so a link planted beforehand is refused.
    """
    for path in paths:
        if path.is_symlink():
            raise SymlinkRefusedError(path)


def migrate_extension_data(data_root: Path, ext_ids: Iterable[str]) -> list[str]:
    """Move ``<data>/<id>/`` to ``<data>/extensions/<id>/`` where only the old one exists.

    One atomic ``rename`` per extension; a symlink in either place is left
    alone (and logged), never followed. Returns the ids moved.
    """
    moved: list[str] = []
    for ext_id in ext_ids:
        if ext_id in KERNEL_DATA_NAMES:
            continue  # a kernel directory, never an extension's old data
        old, new = data_root / ext_id, extension_data_dir(data_root, ext_id)
        if old.is_symlink() or new.is_symlink() or new.parent.is_symlink():
            log.warning("not migrating data of %s: %s or %s is a symbolic link", ext_id, old, new)
            continue
        if not old.is_dir() or new.exists():
            continue
        new.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(old, new)
        except OSError as exc:
            log.error("could not move data of %s from %s to %s: %s", ext_id, old, new, exc)
            continue
        log.info("moved data of extension %s from %s to %s", ext_id, old, new)
        moved.append(ext_id)
    return moved
