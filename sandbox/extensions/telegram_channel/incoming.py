"""Files people send on Telegram (ADR 0096): which file a message carries, and
fetching it into the channel's data dir for the kernel to keep."""

from __future__ import annotations

import secrets
from pathlib import Path

from telegram import Bot, Message

INBOX = "inbox"  # under the channel's data dir; each fetched file is removed once kept


def file_url_of(base_url: str) -> str:
    """The Bot API's file URL beside its method URL (``.../bot`` → ``.../file/bot``)."""
    head, _, _ = base_url.rpartition("/bot")
    return f"{head}/file/bot"


def incoming_file(message: Message) -> tuple[str, str, str] | None:
    """(name, MIME type, Telegram file id) of the photo (its largest size), document,
    voice note or audio the message carries; ``None`` when it has none."""
    if message.photo:
        largest = message.photo[-1]
        return f"photo-{message.message_id}.jpg", "image/jpeg", largest.file_id
    if message.document is not None:
        document = message.document
        name = document.file_name or f"document-{message.message_id}"
        return name, document.mime_type or "application/octet-stream", document.file_id
    if message.voice is not None:
        voice = message.voice
        return f"voice-{message.message_id}.ogg", voice.mime_type or "audio/ogg", voice.file_id
    if message.audio is not None:
        audio = message.audio
        name = audio.file_name or f"audio-{message.message_id}.mp3"
        return name, audio.mime_type or "audio/mpeg", audio.file_id
    return None


async def fetch_file(bot: Bot, file_id: str, data_dir: Path, name: str) -> Path:
    """Download the file into ``<data dir>/inbox``; the caller removes it when kept."""
    remote = await bot.get_file(file_id)
    inbox = data_dir / INBOX
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / f"{secrets.token_hex(8)}-{Path(name).name}"
    await remote.download_to_drive(path)
    return path
