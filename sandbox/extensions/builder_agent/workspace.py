"""Files the builder may touch: only ``<extensions>/<target id>/``, never through a link.

Every path is checked twice. First by name, for a clear refusal: no absolute
path, no ``..``, no symlink on the way (``lstat`` of each component). Then by
the operating system: directories are opened one component at a time with
``O_NOFOLLOW`` relative to the previous one, and files are opened with
``O_NOFOLLOW`` too, so a symlink swapped in between the check and the write
still cannot redirect it.

Ownership: the ids this builder created are kept in ``created.json`` in its
data dir. An existing extension it did not create is refused unless the call
names it in ``allow_existing`` (the prompt allows that only when the user
asked for that extension by id), and then each write to it needs the owner's
yes to a question naming it and showing the diff (``tools.py``, ADR 0044).
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import re
import stat
import threading
from pathlib import Path, PurePosixPath

ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
CREATED_FILE = "created.json"
SKIPPED_DIRS = frozenset({"__pycache__"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class RefusedError(Exception):
    """A request the builder will not carry out; the message says why."""


class Workspace:
    """Reads and writes inside one extension directory at a time."""

    def __init__(
        self, extensions_dir: Path, data_dir: Path, *, own_id: str, max_file_bytes: int
    ) -> None:
        self.root = extensions_dir.resolve()
        self._created_file = data_dir / CREATED_FILE
        self._own_id = own_id
        self._max_file_bytes = max_file_bytes
        # The SDK runs sync tools in threads, and a model may ask for several writes at once.
        self._write_lock = threading.Lock()

    # ------------------------------------------------------------ ownership

    def created(self) -> list[str]:
        """Ids this builder created (from ``created.json``)."""
        try:
            data = json.loads(self._created_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise RefusedError(f"cannot read {self._created_file}: {exc}") from exc
        return [str(x) for x in data] if isinstance(data, list) else []

    def check_access(self, ext_id: str, allow_existing: str = "") -> None:
        """Raise ``RefusedError`` unless the builder may work on ``ext_id``."""
        if not ID_RE.match(ext_id):
            raise RefusedError(
                f"extension id {ext_id!r} must be lower_snake_case (a-z, digits, _; "
                "starting with a letter)"
            )
        if ext_id == self._own_id:
            raise RefusedError(f"{self._own_id} never modifies itself")
        ext_dir = self.root / ext_id
        if ext_dir.is_symlink():
            raise RefusedError(f"{ext_dir} is a symlink; refusing to work through it")
        if not ext_dir.exists() or ext_id in self.created():
            return
        if allow_existing == ext_id:
            return
        raise RefusedError(
            f"extension {ext_id!r} already exists and was not created by {self._own_id}. "
            f"Change it only if the user asked for {ext_id!r} by id; then pass "
            f"allow_existing={ext_id!r}."
        )

    def foreign(self, ext_id: str) -> bool:
        """An existing extension this builder did not create: changing it needs the
        owner's confirmation."""
        return (self.root / ext_id).exists() and ext_id not in self.created()

    def diff(self, ext_id: str, path: str, content: str) -> str:
        """The unified diff a write of ``content`` to ``path`` would make."""
        self._parts(ext_id, path)  # a path that write_file would refuse is refused first
        try:
            old = self.read_file(ext_id, path)
        except RefusedError:
            if (self.root / ext_id / path).exists():
                raise
            old = ""  # a new file in the extension
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            content.splitlines(keepends=True),
            fromfile=f"{ext_id}/{path}",
            tofile=f"{ext_id}/{path}",
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def _remember(self, ext_id: str) -> None:
        created = self.created()
        if ext_id in created:
            return
        self._created_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._created_file.with_suffix(".tmp")
        tmp.write_text(json.dumps([*created, ext_id], indent=2), encoding="utf-8")
        os.replace(tmp, self._created_file)

    # ------------------------------------------------------------ files

    def list_files(self, ext_id: str) -> list[tuple[str, int]]:
        """``(relative path, size)`` of every regular file; symlinks are not followed."""
        if not (self.root / ext_id).is_dir():
            return []
        fd = self._open_dirs([ext_id], create=False)
        found: list[tuple[str, int]] = []
        try:
            for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=fd):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
                for name in sorted(filenames):
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    rel = os.path.normpath(os.path.join(dirpath, name))
                    if stat.S_ISREG(info.st_mode):
                        found.append((rel, info.st_size))
        finally:
            os.close(fd)
        return found

    def read_file(self, ext_id: str, path: str) -> str:
        data = self._read_bytes(ext_id, path, self._max_file_bytes + 1)
        if len(data) > self._max_file_bytes:
            raise RefusedError(f"{path} is larger than {self._max_file_bytes} bytes")
        return data.decode("utf-8", errors="replace")

    def _read_bytes(self, ext_id: str, path: str, limit: int = -1) -> bytes:
        parts = self._parts(ext_id, path)
        fd = self._open_dirs(parts[:-1], create=False)
        try:
            file_fd = _open_file(parts[-1], os.O_RDONLY, fd, path)
        finally:
            os.close(fd)
        with os.fdopen(file_fd, "rb") as fh:
            return fh.read(limit)

    def write_file(self, ext_id: str, path: str, content: str) -> int:
        """Write (replace) one file; returns the number of bytes written."""
        data = content.encode("utf-8")
        if len(data) > self._max_file_bytes:
            raise RefusedError(f"{path}: content is larger than {self._max_file_bytes} bytes")
        parts = self._parts(ext_id, path)
        with self._write_lock:
            if not (self.root / ext_id).exists():
                self._remember(ext_id)  # recorded before the first byte lands
            self._write(parts, data, path)
        return len(data)

    def _write(self, parts: list[str], data: bytes, shown: str) -> None:
        fd = self._open_dirs(parts[:-1], create=True)
        try:
            tmp = f".{parts[-1]}.builder-tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            with os.fdopen(_open_file(tmp, flags, fd, shown), "wb") as fh:
                fh.write(data)
            os.replace(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)

    def digest(self, ext_id: str) -> str:
        """A hash of every file's path and content: "these exact files"."""
        hasher = hashlib.sha256()
        for rel, _size in self.list_files(ext_id):
            hasher.update(rel.encode() + b"\0")
            hasher.update(self._read_bytes(ext_id, rel) + b"\0")
        return hasher.hexdigest()

    def symlinks(self, ext_id: str) -> list[str]:
        """Symlinks inside the extension (refused by validation)."""
        ext_dir = self.root / ext_id
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(ext_dir, followlinks=False):
            for name in [*dirnames, *filenames]:
                full = Path(dirpath) / name
                if full.is_symlink():
                    found.append(str(full.relative_to(ext_dir)))
        return sorted(found)

    # ------------------------------------------------------------ path checks

    def _parts(self, ext_id: str, path: str) -> list[str]:
        """``[ext_id, *components]`` of a safe relative path, or ``RefusedError``."""
        if not path or not path.strip():
            raise RefusedError("the path is empty")
        if "\0" in path or "\\" in path:
            raise RefusedError(f"{path!r}: backslashes and NUL characters are refused")
        pure = PurePosixPath(path)
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", path) or path.startswith("~"):
            raise RefusedError(
                f"{path!r} is an absolute path; give a path relative to the extension directory"
            )
        if ".." in pure.parts:
            raise RefusedError(f"{path!r} contains '..'; paths must stay inside {ext_id}/")
        parts = [p for p in pure.parts if p != "."]
        if not parts:
            raise RefusedError(f"{path!r} names the extension directory itself, not a file")
        current = self.root / ext_id
        for part in parts:
            current = current / part
            if current.is_symlink():
                raise RefusedError(
                    f"{path!r} goes through the symlink {current}; symlinks are refused"
                )
        return [ext_id, *parts]

    def _open_dirs(self, parts: list[str], *, create: bool) -> int:
        """Open ``root/parts...`` one directory at a time without following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                try:
                    next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _refusal(exc, "/".join(parts)) from exc
                os.close(fd)
                fd = next_fd
        except BaseException:
            os.close(fd)
            raise
        return fd


def _open_file(name: str, flags: int, dir_fd: int, shown: str) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(exc, shown) from exc


def _refusal(exc: OSError, shown: str) -> RefusedError:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return RefusedError(f"{shown!r} goes through a symlink; symlinks are refused")
    if exc.errno == errno.ENOTDIR:
        return RefusedError(f"{shown!r}: a component is a file, not a directory")
    if exc.errno == errno.ENOENT:
        return RefusedError(f"{shown!r} does not exist")
    return RefusedError(f"{shown!r}: {exc.strerror or exc}")
