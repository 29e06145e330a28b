"""Files on the HTTP API (ADR 0096): a reply's files as links, served to their person.

A tool's file reaches the channel before the reply ends (``send_file``): the
request waiting for that reply gets it under ``hearth.files`` — ``{id, name,
mime_type, size, caption, url}`` — and the web page shows an image inline and
any other file as a link. ``GET /v1/files/{id}`` needs the token or the page's
session, like every route, and serves only a file kept for the person the API
speaks for (``http:default`` in ``people:``): an id of anyone else's file is a
404, never their bytes. A request's files — chat ``image_url`` and ``file``
parts, Responses ``input_image`` and ``input_file`` parts, as ``data:`` URLs or
ids of files kept already — are kept for that person and come with the message
(``keep_uploads``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import mimetypes
import secrets
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from core.extensions.contract import ExtensionContext, KeptFile

from .auth import TokenCheck
from .openai_shape import ApiError, Upload

API_USER = "default"  # the HTTP API's one user: whoever holds the token (``http:default``)
FILES_PATH = "/v1/files/"


class FilesBackend(Protocol):
    """What the files route needs from the channel."""

    @property
    def tokens(self) -> TokenCheck | None: ...
    @property
    def context(self) -> ExtensionContext: ...


def file_entry(file: KeptFile) -> dict[str, Any]:
    """A file as a reply lists it (``hearth.files``)."""
    return {
        "id": file.file_id,
        "name": file.name,
        "mime_type": file.mime_type,
        "size": file.size,
        "caption": file.caption,
        "url": FILES_PATH + file.file_id,
    }


def file_line(file: KeptFile) -> str:
    """A file as a notification shows it (no request waited for the reply)."""
    caption = f" — {file.caption}" if file.caption else ""
    return f"[file] {file.name}{caption}: {FILES_PATH}{file.file_id}"


UNKNOWN_TYPE = "application/octet-stream"
INBOX = "inbox"  # under the channel's data dir; a decoded upload, removed once kept
_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
}


async def keep_uploads(context: ExtensionContext, uploads: tuple[Upload, ...]) -> list[str]:
    """Keep the request's files for the API's person: their ids, in order. A
    ``data:`` URL is decoded and kept (an image part must hold a picture); a
    ``file_id`` must name a file kept for the person already. 400 for a link to
    elsewhere, bad base64 or an unknown id; 413 naming ``files.max_bytes`` for
    a file over it."""
    kept: list[str] = []
    for number, upload in enumerate(uploads, 1):
        if upload.file_id is not None:
            if await context.kept_file(API_USER, upload.file_id) is None:
                raise ApiError(
                    400, f"no file {upload.file_id!r} is kept for you", code="file_not_found"
                )
            kept.append(upload.file_id)
            continue
        mime_type, data = _decoded(upload)
        kind = "image" if upload.image else "file"
        name = upload.name or f"{kind}-{number}{_EXTENSIONS.get(mime_type, '.bin')}"
        inbox = context.data_dir / INBOX
        path = inbox / f"{secrets.token_hex(8)}-upload"
        await asyncio.to_thread(inbox.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_bytes, data)
        try:
            file = await context.keep_file(API_USER, name, mime_type, str(path))
        except ValueError as exc:
            raise ApiError(413, str(exc), code="file_too_large") from None
        finally:
            await asyncio.to_thread(path.unlink, True)
        kept.append(file.file_id)
    return kept


def _decoded(upload: Upload) -> tuple[str, bytes]:
    """The upload's MIME type and bytes: from a ``data:...;base64,`` URL, or bare
    base64 beside a document's name; a type the sender did not know (none, or
    ``application/octet-stream``: a browser's for ``.md``) is guessed from the name."""
    head, comma, payload = upload.url.partition(",")
    if comma and head.startswith("data:") and head.endswith(";base64"):
        mime_type = head.removeprefix("data:").removesuffix(";base64")
    elif upload.name and not comma and upload.url and "://" not in upload.url:
        mime_type, payload = "", upload.url
    else:
        what = "an image" if upload.image else "a file"
        raise ApiError(
            400,
            f"{what} must come as a data: URL (data:image/png;base64,...) or the id "
            "of a file kept for you; a link to elsewhere is not fetched",
        )
    if mime_type in ("", UNKNOWN_TYPE) and upload.name:
        mime_type = mimetypes.guess_type(upload.name)[0] or mime_type
    if upload.image and not mime_type.startswith("image/"):
        raise ApiError(400, f"an image part holds {mime_type or 'no type'}, not an image")
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error:
        raise ApiError(400, "a file's base64 is not valid") from None
    return mime_type or UNKNOWN_TYPE, data


def files_route(backend: FilesBackend) -> Route:
    """``GET /v1/files/{file_id}``: the person's own file, else 404."""

    async def serve(request: Request) -> Response:
        tokens = backend.tokens
        if tokens is None:
            raise ApiError(503, "Hearth is starting; try again in a moment")
        tokens.require(request)
        file_id = request.path_params["file_id"]
        file = await backend.context.kept_file(API_USER, file_id)
        if file is None:
            raise ApiError(404, f"no file {file_id!r} is kept for you", code="file_not_found")
        inline = file.is_image or file.mime_type == "application/pdf"
        return FileResponse(
            file.path,
            media_type=file.mime_type,
            filename=file.name,
            content_disposition_type="inline" if inline else "attachment",
            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "private"},
        )

    return Route(FILES_PATH + "{file_id}", serve, methods=["GET"])
