"""Files a person sends, offered to the model (issue 45, ADR 0096).

A channel keeps what the person sent (``ExtensionContext.keep_file``) and
names the ids with the message (``on_user_message(files=...)``); the router
hands them here, only when there are some, and the turn gets:

- a picture as an ``input_image`` part beside the text when the configured
  model reads images (``files.vision``), else a one-line note saying it cannot;
- a text-like document (txt, md, csv, json; a PDF through ``pypdf``) as its
  text, cut at ``files.text_budget_tokens``
  (about four characters a token);
- a voice note as its transcript, from the provider's
  ``/v1/audio/transcriptions`` (``files.transcription_model``), else a note;
- anything else as a line naming it.

An id that is not the person's (another's file, a stale id) is a note too:
nothing of anyone else's is read.

A picture is given to the model on the turn it came with only: the history
keeps the line naming it and its kept file's id, and ``for_history`` puts a
one-line note where its base64 was, so later turns do not carry (and pay for)
its bytes again.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.config.sections import FilesSettings
from core.extensions.contract import KeptFile, TurnContext
from core.kernel.files.store import FileStore

__all__ = ["PICTURE_NOTE", "TEXT_TYPES", "Offering", "Transcribe", "for_history", "with_parts"]

log = logging.getLogger("core.kernel.files")

TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/csv", "application/json"})
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".csv", ".json"})
CHARS_PER_TOKEN = 4
Transcribe = Callable[[KeptFile], Awaitable[str]]
PICTURE_NOTE = (
    "(the picture named above was shown on the turn it came; it is kept as a file, "
    "not in the conversation)"
)


def with_parts(messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with ``parts`` joined to the last one's text (its content as parts)."""
    *before, last = messages
    text = last.get("content")
    content = [{"type": "input_text", "text": text}] if isinstance(text, str) and text else []
    return [*before, {**last, "content": [*content, *parts]}]


def for_history(items: list[Any]) -> list[Any]:
    """``items`` as the history keeps them: each picture a user message gave as an
    ``input_image`` part (a ``data:`` URL) replaced by ``PICTURE_NOTE``; anything
    else as it is (the same objects)."""
    kept: list[Any] = []
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if not isinstance(content, list) or not any(map(_is_picture, content)):
            kept.append(item)
            continue
        note = {"type": "input_text", "text": PICTURE_NOTE}
        kept.append({**item, "content": [note if _is_picture(p) else p for p in content]})
    return kept


def _is_picture(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") == "input_image"
        and str(part.get("image_url", "")).startswith("data:")
    )


class Offering:
    """Turns a message's file ids into text the model reads and image parts."""

    def __init__(
        self, store: FileStore, settings: FilesSettings, transcribe: Transcribe | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.transcribe = transcribe

    async def offer(
        self, turn: TurnContext, file_ids: str, text: str
    ) -> tuple[str, list[dict[str, Any]]]:
        """The message's text with what the files say, and the image parts."""
        lines: list[str] = [text] if text.strip() else []
        parts: list[dict[str, Any]] = []
        for file_id in filter(None, file_ids.split(",")):
            file = await asyncio.to_thread(self.store.find, turn.person_key, file_id)
            if file is None:
                lines.append(f"(A file the user sent, {file_id}, is no longer kept.)")
                continue
            try:
                await self._one(file, lines, parts)
            except Exception as exc:  # a broken file is a note, never a failed turn
                log.warning("file %s could not be read: %s", file.name, exc)
                lines.append(f"(The user sent {file.name}; it could not be read: {exc}.)")
        return "\n\n".join(lines), parts

    async def _one(self, file: KeptFile, lines: list[str], parts: list[dict[str, Any]]) -> None:
        if file.is_image:
            if not self.settings.vision:
                lines.append(
                    f"(The user sent a picture, {file.name}; the configured model cannot "
                    "see images: files.vision is false.)"
                )
                return
            data = await asyncio.to_thread(Path(file.path).read_bytes)
            url = f"data:{file.mime_type};base64,{base64.b64encode(data).decode()}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
            lines.append(f"(The user sent a picture: {file.name}, kept as file {file.file_id}.)")
            return
        if file.mime_type.startswith("audio/"):
            lines.append(await self._heard(file))
            return
        text = await asyncio.to_thread(self._read_text, file)
        if text is None:
            lines.append(
                f"(The user sent a file, {file.name} ({file.mime_type}, {file.size} bytes); "
                "its content cannot be read as text.)"
            )
            return
        budget = self.settings.text_budget_tokens * CHARS_PER_TOKEN
        cut = len(text) > budget
        shown = text[:budget]
        note = f" (cut at {self.settings.text_budget_tokens} tokens)" if cut else ""
        lines.append(f"[The user sent {file.name}{note}:]\n{shown}")

    async def _heard(self, file: KeptFile) -> str:
        if self.transcribe is None:
            return (
                f"(The user sent a voice note, {file.name}; no transcription is configured: "
                "files.transcription_model is null.)"
            )
        try:
            words = await self.transcribe(file)
        except Exception as exc:
            log.warning("voice note %s not transcribed: %s", file.name, exc)
            return f"(The user sent a voice note, {file.name}; it could not be transcribed.)"
        return f"[Voice note, transcribed:] {words.strip()}"

    @staticmethod
    def _read_text(file: KeptFile) -> str | None:
        path = Path(file.path)
        if file.mime_type == "application/pdf" or path.suffix.lower() == ".pdf":
            return _pdf_text(path)
        if file.mime_type in TEXT_TYPES or path.suffix.lower() in TEXT_SUFFIXES:
            return path.read_bytes().decode("utf-8", errors="replace")
        if file.mime_type.startswith("text/"):
            return path.read_bytes().decode("utf-8", errors="replace")
        return None


def _pdf_text(path: Path) -> str:
    """A PDF's text through ``pypdf``."""
    from pypdf import PdfReader  # imported when a PDF comes: the kernel starts without it

    reader = PdfReader(io.BytesIO(path.read_bytes()))
    return "\n".join(page.extract_text() or "" for page in reader.pages).strip()
