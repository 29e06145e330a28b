"""Files in and out of turns (issue 45, ADR 0096): kept per person, sent after replies."""

from __future__ import annotations

from core.kernel.files.access import PersonFiles
from core.kernel.files.outgoing import TurnFiles, file_line
from core.kernel.files.store import FILES_DIR, OWNER_DIR, FileStore, FileTooLarge, describe_size

__all__ = [
    "FILES_DIR",
    "OWNER_DIR",
    "FileStore",
    "FileTooLarge",
    "PersonFiles",
    "TurnFiles",
    "describe_size",
    "file_line",
]
