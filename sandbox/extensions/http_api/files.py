"""Files on the HTTP API (ADR 0096): a reply's files as links, served to their person.

A tool's file reaches the channel before the reply ends (``send_file``): the
request waiting for that reply gets it under ``hearth.files`` — ``{id, name,
mime_type, size, caption, url}`` — and the web page shows an image inline and
any other file as a link. ``GET /v1/files/{id}`` needs the token or the page's
session, like every route, and serves only a file kept for the person the API
speaks for (``http:default`` in ``people:``): an id of anyone else's file is a
404, never their bytes.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from core.extensions.contract import ExtensionContext, KeptFile

from .auth import TokenCheck
from .openai_shape import ApiError

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
