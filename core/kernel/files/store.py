"""Files kept per person under the data dir (issue 45, ADR 0096).

Each file is one directory ``files/<person>/<id>/`` holding the bytes under
their own name and ``meta.json`` (name, MIME type, size, caption, the turn it
came with). The person is the directory: a file is found only through the
person asking for it, so a member can never reach the owner's files by id, and
an id is random (not guessable). A file over ``files.max_bytes`` is refused
with a ``FileTooLarge`` naming the limit. Files older than
``files.retention_days`` are removed by ``prune`` (run when the kernel starts
and with each kept file, at most once an hour).
"""

from __future__ import annotations

import json
import logging
import mimetypes
import re
import secrets
import shutil
import time
from pathlib import Path

from core.config.sections import FilesSettings
from core.extensions.contract import Artifact, KeptFile
from core.runtime import HearthError

__all__ = ["FILES_DIR", "OWNER_DIR", "FileStore", "FileTooLarge", "describe_size"]

log = logging.getLogger("core.kernel.files")

FILES_DIR = "files"  # under the data dir
OWNER_DIR = "_owner"  # the owner's files (a person name never starts with "_")
META = "meta.json"
PRUNE_EVERY_S = 3600.0
_ID = re.compile(r"^[0-9a-f]{24}$")


def describe_size(size: int) -> str:
    """``20 MB``, ``512 KB``: a limit as people read it."""
    if size >= 1_000_000:
        return f"{size / 1_000_000:g} MB"
    if size >= 1000:
        return f"{size / 1000:g} KB"
    return f"{size} bytes"


class FileTooLarge(HearthError, ValueError):
    """A file over ``files.max_bytes``: the message names the file and the limit."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        super().__init__(
            f"{name} is {describe_size(size)}; files larger than {describe_size(limit)} "
            "are not accepted (files.max_bytes)"
        )
        self.limit = limit


class FileStore:
    """Keeps, finds and removes one household's files (``root``: ``<data>/files``)."""

    def __init__(self, root: Path, settings: FilesSettings | None = None) -> None:
        self.root = root
        self.settings = settings or FilesSettings()
        self._pruned = 0.0

    def _person_dir(self, person: str | None) -> Path:
        if not person:
            return self.root / OWNER_DIR
        if person.startswith((".", "_")) or "/" in person or "\\" in person:
            raise ValueError(f"person {person!r} cannot name a files directory")
        return self.root / person

    def keep_bytes(
        self,
        person: str | None,
        name: str,
        mime_type: str,
        data: bytes,
        *,
        caption: str = "",
        turn_id: str | None = None,
    ) -> KeptFile:
        """Keep ``data`` for ``person`` (``None``/``""``: the owner); refuses a file over
        the limit (``FileTooLarge``)."""
        if len(data) > self.settings.max_bytes:
            raise FileTooLarge(name, len(data), self.settings.max_bytes)
        safe = Path(name).name or "file"
        mime = mime_type or mimetypes.guess_type(safe)[0] or "application/octet-stream"
        file_id = secrets.token_hex(12)
        folder = self._person_dir(person) / file_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / safe).write_bytes(data)
        meta = {
            "name": safe,
            "mime_type": mime,
            "size": len(data),
            "caption": caption,
            "turn_id": turn_id,
            "created": time.time(),
        }
        (folder / META).write_text(json.dumps(meta), encoding="utf-8")
        if time.monotonic() - self._pruned > PRUNE_EVERY_S:
            self.prune()
        return KeptFile(file_id, safe, mime, len(data), str(folder / safe), caption, person or "")

    def keep(self, person: str | None, artifact: Artifact, turn_id: str | None = None) -> KeptFile:
        """Keep a tool's artifact (its bytes, or a copy of the file at its path)."""
        data = artifact.data
        if data is None:
            source = Path(str(artifact.path))
            if not source.is_file():
                raise FileNotFoundError(f"artifact {artifact.name!r}: no file at {source}")
            size = source.stat().st_size
            if size > self.settings.max_bytes:
                raise FileTooLarge(artifact.name, size, self.settings.max_bytes)
            data = source.read_bytes()
        return self.keep_bytes(
            person,
            artifact.name,
            artifact.mime_type,
            data,
            caption=artifact.caption,
            turn_id=turn_id,
        )

    def find(self, person: str | None, file_id: str) -> KeptFile | None:
        """``person``'s file ``file_id``; ``None`` when it is not theirs or not kept."""
        if not _ID.match(file_id):
            return None
        folder = self._person_dir(person) / file_id
        try:
            meta = json.loads((folder / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        path = folder / str(meta["name"])
        if not path.is_file():
            return None
        return KeptFile(
            file_id,
            str(meta["name"]),
            str(meta["mime_type"]),
            int(meta["size"]),
            str(path),
            str(meta.get("caption", "")),
            person or "",
        )

    def of_turn(self, person: str | None, turn_id: str) -> list[KeptFile]:
        """The files kept for ``person`` with turn ``turn_id``, oldest first: what a
        reply sent again after a crash sends again (a scan of the person's files,
        only then)."""
        folder = self._person_dir(person)
        found: list[tuple[float, str]] = []
        for meta_path in folder.glob(f"*/{META}") if folder.is_dir() else ():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if meta.get("turn_id") == turn_id:
                found.append((float(meta.get("created", 0.0)), meta_path.parent.name))
        files = (self.find(person, file_id) for _, file_id in sorted(found))
        return [file for file in files if file is not None]

    def prune(self, now: float | None = None) -> int:
        """Remove files older than ``files.retention_days``; how many went."""
        now = time.time() if now is None else now
        self._pruned = time.monotonic()
        cutoff = now - self.settings.retention_days * 86400
        removed = 0
        if not self.root.is_dir():
            return 0
        for meta_path in self.root.glob(f"*/*/{META}"):
            try:
                created = float(json.loads(meta_path.read_text(encoding="utf-8"))["created"])
            except (OSError, ValueError, KeyError):
                continue
            if created < cutoff:
                shutil.rmtree(meta_path.parent, ignore_errors=True)
                removed += 1
        if removed:
            log.info(
                "removed %d kept file(s) older than %d days", removed, self.settings.retention_days
            )
        return removed
