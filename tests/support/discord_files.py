"""Files for the fake Discord (ADR 0096): what a multipart message upload carries
(discord.py's ``payload_json`` and ``files[n]``), and the attachments of a
person's message, served from the fake's own "CDN" (``/attachments/...``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web


@dataclass(frozen=True)
class Upload:
    """A file the bot attached to a message."""

    filename: str
    content_type: str
    data: bytes


async def read_body(request: web.Request) -> tuple[dict[str, Any], list[Upload]]:
    """The request's JSON (a multipart's ``payload_json``) and the files it uploads."""
    if not request.can_read_body:
        return {}, []
    if not request.content_type.startswith("multipart/"):
        try:
            return await request.json(), []
        except ValueError:
            return {"raw": (await request.text())[:200]}, []
    body: dict[str, Any] = {}
    uploads: list[Upload] = []
    reader = await request.multipart()
    while (part := await reader.next()) is not None:
        assert isinstance(part, BodyPartReader)
        data = await part.read()
        if part.name == "payload_json":
            body = json.loads(data)
        elif part.filename is not None:
            kind = part.headers.get("Content-Type", "application/octet-stream")
            uploads.append(Upload(part.filename, kind, bytes(data)))
    return body, uploads


def attachment_json(
    attachment_id: int, filename: str, content_type: str, size: int, url: str
) -> dict[str, Any]:
    """An attachment of a message as Discord describes it (its bytes at ``url``)."""
    return {
        "id": str(attachment_id),
        "filename": filename,
        "content_type": content_type,
        "size": size,
        "url": url,
        "proxy_url": url,
    }
