"""Files by e-mail (ADR 0096): a tool's files ride on the reply mail as MIME
attachments, and the attachments of a mail are kept for the kernel.

Out: the kernel hands a turn's files to ``send_file`` before the reply goes
out, so the channel holds them (``Held``) until the next mail it sends to that
address — the reply — and attaches them there: one mail, the text with a line
per file (its name and caption) and the files. A file held when no reply
follows (the turn's reply failed) rides on the next mail to that address.
In: each attachment (and inline picture) of a mail is written to
``<data dir>/inbox`` and handed to ``keep_file``, which refuses one over
``files.max_bytes`` with the limit named — the same text as Telegram's,
mailed back in the thread.
"""

from __future__ import annotations

import asyncio
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

from core.extensions.contract import ExtensionContext, KeptFile
from core.extensions.sdk import Refuse, keep_bytes


@dataclass(frozen=True, slots=True)
class Attached:
    """A file a mail carries."""

    name: str
    mime_type: str
    data: bytes


def attached_files(message: EmailMessage) -> tuple[Attached, ...]:
    """The mail's attachments (what is not its text body), inline pictures too."""
    found: list[Attached] = []
    for number, part in enumerate(message.iter_attachments(), start=1):
        if part.is_multipart():
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes) or not data:
            continue
        mime_type = part.get_content_type()
        extension = mimetypes.guess_extension(mime_type) or ""
        name = Path(part.get_filename() or "").name or f"attachment-{number}{extension}"
        found.append(Attached(name, mime_type, data))
    return tuple(found)


async def keep_attached(
    context: ExtensionContext, files: Sequence[Attached], sender: str, refuse: Refuse
) -> list[str]:
    """The ids of ``files``, kept for the person who sent them (``sender``, their
    address); one too large is refused (``refuse``) and left out."""
    kept: list[str] = []
    for file in files:
        file_id = await keep_bytes(context, sender, file.name, file.mime_type, file.data, refuse)
        if file_id is not None:
            kept.append(file_id)
    return kept


class Held:
    """A turn's files, by the address they go to, until the mail that carries them."""

    def __init__(self) -> None:
        self._files: dict[str, list[KeptFile]] = {}

    def hold(self, address: str, file: KeptFile) -> None:
        self._files.setdefault(address, []).append(file)

    def of(self, address: str) -> list[KeptFile]:
        """What waits for ``address``; it stays held until ``sent`` (a failed send keeps it)."""
        return list(self._files.get(address, []))

    def sent(self, address: str, files: Sequence[KeptFile]) -> None:
        left = [f for f in self._files.pop(address, []) if f not in files]
        if left:
            self._files[address] = left


def with_lines(text: str, files: Sequence[KeptFile]) -> str:
    """The mail's text and a line naming each attached file (and its caption)."""
    lines = [f"[attached] {f.name}" + (f" — {f.caption}" if f.caption else "") for f in files]
    return "\n\n".join([text, "\n".join(lines)]) if lines else text


async def attach(message: EmailMessage, files: Sequence[KeptFile]) -> None:
    """Add ``files`` to the mail as attachments."""
    for file in files:
        data = await asyncio.to_thread(Path(file.path).read_bytes)
        maintype, _, subtype = file.mime_type.partition("/")
        if not subtype:
            maintype, subtype = "application", "octet-stream"
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=file.name)
