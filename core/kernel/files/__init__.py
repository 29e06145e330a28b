"""Files in and out of turns (issue 45, ADR 0096): kept per person, sent after replies."""

from __future__ import annotations

from core.kernel.files.access import PersonFiles
from core.kernel.files.incoming import PICTURE_NOTE, Offering, Transcribe, for_history, with_parts
from core.kernel.files.outgoing import TurnFiles, file_line
from core.kernel.files.store import FILES_DIR, OWNER_DIR, FileStore, FileTooLarge, describe_size
from core.kernel.files.voice import ProviderTranscriber

__all__ = [
    "FILES_DIR",
    "OWNER_DIR",
    "PICTURE_NOTE",
    "FileStore",
    "FileTooLarge",
    "Offering",
    "PersonFiles",
    "ProviderTranscriber",
    "Transcribe",
    "TurnFiles",
    "describe_size",
    "file_line",
    "for_history",
    "with_parts",
]
