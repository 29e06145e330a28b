"""Files on Matrix (ADR 0096): a tool's file uploaded to the media repository and
posted as an ``m.image`` or ``m.file`` event, and the pictures, files and voice
notes a person sends fetched for the kernel to keep.

Out: ``POST /_matrix/media/v3/upload`` (nio's ``upload``) gives an ``mxc://``
URI; the event names the file (``filename``), carries the caption as its
``body`` when there is one (Matrix 1.10 media captions) and the type and size
(``info``). In: an ``m.image`` / ``m.file`` / ``m.audio`` / ``m.video``
event's ``url`` is downloaded (``/_matrix/client/v1/media/download``, with
the bot's token) into ``<data dir>/inbox`` and handed to ``keep_file``, which
refuses one over ``files.max_bytes`` with the limit named — the same text as
Telegram's, sent back in the room. Its caption (a ``body`` that is not just
the file's name) comes with it as the message's text.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nio import DownloadError, RoomMessageMedia, UploadError

from core.extensions.contract import ExtensionContext, KeptFile
from core.extensions.sdk import Refuse, inbox_path, keep_path, mime_type_of

from .sender import Sender


class MatrixFileError(Exception):
    """The homeserver refused an upload."""


@dataclass(frozen=True, slots=True)
class Media:
    """A file a person sent: its name, type, caption ("" when none) and ``mxc://`` URI."""

    name: str
    mime_type: str
    caption: str
    url: str


def media_of(event: RoomMessageMedia) -> Media:
    """What an ``m.image`` / ``m.file`` / ``m.audio`` / ``m.video`` event carries."""
    content: dict[str, Any] = event.source.get("content", {})
    info = content.get("info")
    info = info if isinstance(info, dict) else {}
    body = str(content.get("body") or "")
    name = Path(str(content.get("filename") or body)).name or f"file-{event.event_id[1:9]}"
    caption = body if content.get("filename") and body != content.get("filename") else ""
    mime_type = mime_type_of(name, str(info.get("mimetype") or ""))
    return Media(name, mime_type, caption, event.url)


async def keep_media(
    context: ExtensionContext, sender: Sender, media: Media, user_id: str, refuse: Refuse
) -> str | None:
    """The id of the file, kept for the person who sent it (``user_id``, their Matrix
    id: the address is the room's); ``None`` when it could not be fetched or is too
    large (the person is told why)."""
    path = await asyncio.to_thread(inbox_path, context.data_dir, media.name)
    try:
        response = await sender.client.download(media.url, save_to=path)
    except BaseException:
        await asyncio.to_thread(path.unlink, True)
        raise
    if isinstance(response, DownloadError):
        await asyncio.to_thread(path.unlink, True)
        await refuse(f"I could not take {media.name}: {response.message}")
        return None
    return await keep_path(context, user_id, media.name, media.mime_type, path, refuse)


async def send_file(sender: Sender, room_id: str, file: KeptFile) -> None:
    """Upload ``file`` and post it in the room: a picture as ``m.image``, else ``m.file``."""
    data = await asyncio.to_thread(Path(file.path).read_bytes)
    uploaded, _ = await sender.client.upload(
        io.BytesIO(data), content_type=file.mime_type, filename=file.name, filesize=len(data)
    )
    if isinstance(uploaded, UploadError):
        raise MatrixFileError(f"uploading {file.name}: {uploaded.message}")
    content = {
        "msgtype": "m.image" if file.is_image else "m.file",
        "body": file.caption or file.name,
        "filename": file.name,
        "url": uploaded.content_uri,
        "info": {"mimetype": file.mime_type, "size": len(data)},
    }
    await sender.send_content(room_id, content)
