"""Snapshots of extension code: the kernel imports what it hashed (ADR 0073).

``read_code`` reads an extension's files once and hashes those bytes;
``CodeSnapshots.pin`` writes the same bytes to
``<paths.data>/code_snapshots/<id>/<digest>/`` (``CODE_SNAPSHOTS_DIR``), and
the loader imports the extension from there (in the kernel, and in its plugin
host, which gets the snapshot bound read-only). A file changed, swapped or added in the extension
directory after the digest was taken — a planted ``__pycache__/*.pyc``
included — is not what runs: the snapshot holds no bytecode but what the
kernel's own import writes into it, and nothing else writes there.

A snapshot is named by its digest and written once (a temporary directory
renamed into place, so a crash leaves no half snapshot); the next start with
the same code reuses it, with the bytecode the kernel compiled the first
time. The newest ``KEEP`` snapshots of each extension are kept, older ones
removed when a new one is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from core.extensions.loading.code_digest import CodeFiles
from core.runtime.datadir import refuse_symlinks

__all__ = ["CodeSnapshots"]

log = logging.getLogger("core.loader")

KEEP = 4  # snapshots kept per extension: the current one and a few before
_NEW_PREFIX = ".new-"
_FILE_MODE, _EXEC_MODE, _DIR_MODE = 0o444, 0o555, 0o700


class CodeSnapshots:
    """The kernel's private copies of extension code, one directory per digest.

    ``root`` None: a temporary directory of this object's own (a loader that
    reads extensions without a data directory: ``main.py extensions grant``,
    loader unit tests), removed with it.
    """

    def __init__(self, root: Path | None) -> None:
        self._temporary = None
        if root is None:
            self._temporary = tempfile.TemporaryDirectory(prefix="hearth-code-")
            root = Path(self._temporary.name)
        self.root = root

    def pin(self, code: CodeFiles, ext_id: str) -> Path:
        """The snapshot of exactly ``code`` (written now unless it exists)."""
        home = self.root / ext_id
        final = home / code.digest
        refuse_symlinks(home, final)  # a kernel directory: never followed
        if final.is_dir():
            with contextlib.suppress(OSError):
                os.utime(final)  # recently used: kept by the pruning below
            return final
        home.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_NEW_PREFIX, dir=home))
        try:
            _write(staging, code)
            os.rename(staging, final)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not final.is_dir():  # not another process that wrote the same first
                raise
        _prune(home, keep=final)
        return final


def _write(staging: Path, code: CodeFiles) -> None:
    """Write each file read into ``staging`` (read-only; executable bits kept)."""
    for item in code.files:
        if item.content is None:
            continue
        path = staging / item.rel
        path.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(item.content)
        os.chmod(path, _EXEC_MODE if item.executable else _FILE_MODE)


def _prune(home: Path, *, keep: Path) -> None:
    """Remove all but the ``KEEP`` most recently used snapshots of one extension
    (and staging directories a crash left behind)."""
    try:
        entries = [p for p in home.iterdir() if p != keep and not p.is_symlink()]
    except OSError:
        return
    staged = [p for p in entries if p.name.startswith(_NEW_PREFIX)]
    done = sorted(
        (p for p in entries if not p.name.startswith(_NEW_PREFIX)),
        key=_mtime,
        reverse=True,
    )
    for path in [*done[KEEP - 1 :], *(p for p in staged if _stale(p))]:
        shutil.rmtree(path, ignore_errors=True)
        log.debug("removed the code snapshot %s", path)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _stale(path: Path) -> bool:
    """A staging directory older than an hour: no write takes that long."""
    return time.time() - _mtime(path) > 3600
