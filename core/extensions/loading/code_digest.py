"""The fingerprint of an extension's code: what a grant binds (ADR 0044).

A grant trusts an extension's code, not only what its manifest asks: code
that changed after the grant — edited by hand, rewritten by the builder
agent, swapped by another extension that can write there — must ask again,
whoever changed it. ``code_digest`` hashes every file of the extension
directory (sorted relative paths, each with its size and content) and
leaves out what is not code: ``__pycache__`` directories, compiled ``.pyc``
/ ``.pyo`` files and a top-level ``data`` directory. A symbolic link counts
as its target's path (and a linked file also as its content); a linked
directory is not descended into.

It is computed once when the loader discovers the extension (and again by
a reload, ``/grant`` and ``main.py extensions grant``, from the files on
disk then).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["code_digest"]

SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_TOP_DIRS = frozenset({"data"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
_CHUNK = 1 << 16


def code_digest(ext_dir: Path) -> str:
    """A stable fingerprint of the files under ``ext_dir``: equal iff the code is."""
    hasher = hashlib.sha256()
    for rel, path in _files(ext_dir):
        hasher.update(rel.encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            hasher.update(b"->" + os.fsencode(os.readlink(path)) + b"\0")
        if path.is_file():
            hasher.update(str(path.stat().st_size).encode() + b"\0")
            with path.open("rb") as fh:
                while chunk := fh.read(_CHUNK):
                    hasher.update(chunk)
        hasher.update(b"\0")
    return hasher.hexdigest()[:32]


def _files(ext_dir: Path) -> list[tuple[str, Path]]:
    """``(relative path, path)`` of every entry that is code, sorted by path."""
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(ext_dir, followlinks=False):
        top = Path(dirpath) == ext_dir
        kept = [
            d for d in dirnames if d not in SKIPPED_DIRS and not (top and d in SKIPPED_TOP_DIRS)
        ]
        dirnames[:] = sorted(d for d in kept if not os.path.islink(os.path.join(dirpath, d)))
        linked_dirs = [d for d in kept if os.path.islink(os.path.join(dirpath, d))]
        for name in [*filenames, *linked_dirs]:
            if name.endswith(SKIPPED_SUFFIXES):
                continue
            path = Path(dirpath, name)
            found.append((path.relative_to(ext_dir).as_posix(), path))
    return sorted(found)
