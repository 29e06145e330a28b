"""The fingerprint of an extension's code: what a grant binds (ADR 0044, 0073).

A grant trusts an extension's code, not only what its manifest asks: code
that changed after the grant — edited by hand, rewritten by the builder
agent, swapped by another extension that can write there — must ask again,
whoever changed it. ``read_code`` reads every file of the extension
directory once and hashes exactly the bytes it read (sorted relative paths,
each with its size and content), leaving out what is not code:
``__pycache__`` directories, compiled ``.pyc`` / ``.pyo`` files and a
top-level ``data`` directory. The loader imports from a snapshot written
from those same bytes (``code_snapshot``), so what runs is what was hashed.

A symbolic link is followed when it stays inside the extension directory (it
is hashed, and copied, as the content it leads to) and refused otherwise
(``CodeLinkError`` naming the link): content outside the directory is
neither hashed nor run. A linked directory that leads back to one of its
own parents is refused too.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from core.runtime.errors import HearthError

__all__ = ["CodeFile", "CodeFiles", "CodeLinkError", "code_digest", "read_code"]

SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_TOP_DIRS = frozenset({"data"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
_EXECUTABLE = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH


class CodeLinkError(HearthError, OSError):
    """A symbolic link in an extension that leads outside it (or into a loop)."""

    def __init__(self, link: Path, why: str) -> None:
        super().__init__(
            errno.ELOOP,
            f"{link} is a symbolic link {why}; an extension's code must lie inside its "
            "directory (copy the files in, or link the whole extension directory instead)",
        )
        self.link = link

    def __str__(self) -> str:
        return str(self.strerror)


@dataclass(frozen=True, slots=True)
class CodeFile:
    """One file as read: its path relative to the extension, bytes and exec bit."""

    rel: str
    content: bytes | None  # None: not a regular file (a socket, a FIFO): name only
    executable: bool = False


@dataclass(frozen=True, slots=True)
class CodeFiles:
    """An extension's code as read once: the files and the digest of exactly them."""

    ext_dir: Path
    files: tuple[CodeFile, ...]
    digest: str

    def content(self, rel: str) -> bytes | None:
        """The bytes read for ``rel`` (``manifest.yaml``), None when there is none."""
        return next((f.content for f in self.files if f.rel == rel), None)


def code_digest(ext_dir: Path) -> str:
    """A stable fingerprint of the files under ``ext_dir``: equal iff the code is."""
    return read_code(ext_dir).digest


def read_code(ext_dir: Path) -> CodeFiles:
    """Every code file under ``ext_dir``, read once, with their digest.

    Raises ``CodeLinkError`` for a link leading outside (or a loop) and
    ``OSError`` when a file cannot be read.
    """
    root = Path(os.path.realpath(ext_dir))  # the directory itself may be a link
    found: list[CodeFile] = []
    _walk(_Walk(root, found), ext_dir, root, "", frozenset({str(root)}))
    found.sort(key=lambda f: f.rel)
    hasher = hashlib.sha256()
    for item in found:  # the digest of ADR 0044, unchanged for plain files
        hasher.update(item.rel.encode("utf-8", "surrogateescape") + b"\0")
        if item.content is not None:
            hasher.update(str(len(item.content)).encode() + b"\0")
            hasher.update(item.content)
        hasher.update(b"\0")
    return CodeFiles(ext_dir, tuple(found), hasher.hexdigest()[:32])


@dataclass(frozen=True, slots=True)
class _Walk:
    root: Path  # the extension directory, links resolved
    found: list[CodeFile]


def _walk(walk: _Walk, shown: Path, real: Path, prefix: str, parents: frozenset[str]) -> None:
    """Read the directory ``real`` (named ``shown`` in errors) into ``walk.found``."""
    with os.scandir(real) as entries:
        listed = sorted(entries, key=lambda e: e.name)
    for entry in listed:
        name, path = entry.name, shown / entry.name
        if name.endswith(SKIPPED_SUFFIXES):
            continue
        rel = prefix + name
        skipped_dir = name in SKIPPED_DIRS or (not prefix and name in SKIPPED_TOP_DIRS)
        if entry.is_symlink():
            if skipped_dir and os.path.isdir(entry.path):
                continue  # a linked data/ or __pycache__/ is left out, wherever it leads
            target = _inside_target(walk.root, path, Path(entry.path), parents)
            if target.is_dir():
                _walk(walk, path, target, rel + "/", parents | {str(target)})
            else:
                walk.found.append(_read(target, rel) if target.is_file() else CodeFile(rel, None))
        elif entry.is_dir(follow_symlinks=False):
            if not skipped_dir:
                target = Path(entry.path)
                _walk(walk, path, target, rel + "/", parents | {str(target)})
        elif entry.is_file(follow_symlinks=False):
            walk.found.append(_read(Path(entry.path), rel))
        else:  # a socket, a FIFO, a device: its name only, never opened
            walk.found.append(CodeFile(rel, None))


def _inside_target(root: Path, link: Path, actual: Path, parents: frozenset[str]) -> Path:
    """Where ``link`` leads, if that is inside the extension and not a loop."""
    target = Path(os.path.realpath(actual))
    if not target.exists():
        raise CodeLinkError(link, f"to {os.readlink(actual)!r}, which does not exist")
    if target != root and root not in target.parents:
        raise CodeLinkError(link, f"to {target}, outside the extension directory")
    if str(target) in parents:
        raise CodeLinkError(link, f"to {target}, one of its own parents (a loop)")
    return target


def _read(path: Path, rel: str) -> CodeFile:
    """The bytes of one file, opened without following a link swapped in meanwhile."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return CodeFile(rel, None)
        return CodeFile(rel, fh.read(), bool(info.st_mode & _EXECUTABLE))
