"""The layout of ``paths.data``: kernel files at the top, extension data below.

Extensions get ``<paths.data>/extensions/<id>/``, never a directory beside the
kernel's own files: an extension named ``logs`` once owned the directory the
supervisor writes ``kernel.log`` into, and could point that file anywhere.
Kernel files are opened without following symbolic links
(``open_nofollow``), and the names the kernel uses are reserved as extension
ids (``RESERVED_IDS``).

The data holds conversations, memories and tokens, so it is private to the
user running Hearth: ``make_private`` sets the directory to 0700 and every
database file in it (kernel files and extension stores, with their ``-wal``,
``-shm`` and ``-journal`` files) to 0600 at each start, which also mends an
older install; ``create_private`` makes a database file 0600 before SQLite
first opens it, and SQLite gives the ``-wal``/``-shm`` files it makes the
mode of their database (ADR 0048). Modes are set explicitly, not through the
process-wide umask, which a library must not change under its host.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from core.runtime.errors import HearthError

if TYPE_CHECKING:
    pass

__all__ = [
    "CODE_SNAPSHOTS_DIR",
    "EXTENSIONS_SUBDIR",
    "JOURNAL_FILE",
    "KERNEL_DATA_NAMES",
    "PROJECT_ROOT",
    "RESERVED_IDS",
    "SCHEDULES_FILE",
    "SESSIONS_FILE",
    "STATE_FILE",
    "SymlinkRefusedError",
    "create_private",
    "extension_data_dir",
    "make_private",
    "migrate_extension_data",
    "open_nofollow",
    "refuse_symlinks",
]

log = logging.getLogger("core.runtime.datadir")

# the checkout: where settings.yaml, .env and sandbox/ are found unless told otherwise
PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS_SUBDIR = "extensions"
CODE_SNAPSHOTS_DIR = "code_snapshots"  # the extension code the kernel imports (ADR 0073)
# The kernel's databases in ``paths.data`` (SQLite; with ``storage.backend: postgres``
# their tables live in PostgreSQL instead), named once here so a command reading one
# (``main.py usage``, ``events``) needs no import of the kernel that writes it.
JOURNAL_FILE = "events.db"  # the event journal (+ -wal, -shm)
SESSIONS_FILE = "sessions.db"  # histories, the ledger, post-processing, usage
SCHEDULES_FILE = "schedules.db"  # reminders (core/scheduling/)
STATE_FILE = "state.db"  # extension state (core/state/)
_PRIVATE_DIR_MODE = 0o700
_PRIVATE_FILE_MODE = 0o600
_DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")

# Every name the kernel and the supervisor create directly in ``paths.data``
# (tests/integration/test_hygiene_datadir.py checks the module constants that name them).
KERNEL_DATA_NAMES: frozenset[str] = frozenset(
    {
        EXTENSIONS_SUBDIR,
        CODE_SNAPSHOTS_DIR,
        "logs",  # core/supervisor/logs.py LOG_FILE
        JOURNAL_FILE,
        SESSIONS_FILE,
        SCHEDULES_FILE,
        STATE_FILE,
        "metrics.prom",  # core/metrics/export.py SNAPSHOT_FILE
        "outbox.db",
        "grants.json",
        "grants",
        "restart_requested",  # core/runtime/lifecycle.py RESTART_REQUEST_FILE
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


class SymlinkRefusedError(HearthError, OSError):
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


def _is_database_file(name: str) -> bool:
    """``events.db``, ``store.sqlite3-wal``: a SQLite database or one of its side files."""
    return any(
        name.endswith(suffix + side) for suffix in _DATABASE_SUFFIXES for side in _SQLITE_SIDE_FILES
    )


def create_private(path: Path) -> None:
    """Create the empty database file ``path`` with mode 0600 unless it exists (an
    empty file is a valid SQLite database); never through a symbolic link."""
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def make_private(data_root: Path) -> None:
    """``data_root`` (created if missing) 0700, every database file below it 0600.

    A linked data root is followed (users link it on purpose); links below it are
    neither followed nor changed; a file that cannot be changed (another owner)
    is logged and left. How many paths an older install had open is logged.
    """
    data_root.mkdir(mode=_PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    changed = [data_root] if _restrict(data_root, _PRIVATE_DIR_MODE, os.stat(data_root)) else []
    for directory, _, files in os.walk(data_root):  # never into a linked directory
        for path in (Path(directory, name) for name in files if _is_database_file(name)):
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and _restrict(path, _PRIVATE_FILE_MODE, info):
                changed.append(path)
    if changed:
        log.info("%s: %d paths made private (0700 / 0600)", data_root, len(changed))


def _restrict(path: Path, mode: int, info: os.stat_result) -> bool:
    """Take group and other bits off ``path``; whether its mode changed."""
    if stat.S_IMODE(info.st_mode) & 0o077 == 0:
        return False
    try:
        os.chmod(path, mode)  # a regular file (checked with lstat) or the data root
    except OSError as exc:
        log.warning("could not make %s private (mode %o): %s", path, mode, exc)
        return False
    return True


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
