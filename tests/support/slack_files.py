"""Files for the fake Slack (ADR 0096): the upload of ``files_upload_v2``
(``files.getUploadURLExternal``, the bytes to the URL it hands out,
``files.completeUploadExternal``) and the files a person shares, served at
their ``url_private_download`` to the bot token alone."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class SharedFile:
    """A file the bot uploaded and shared."""

    name: str
    title: str
    data: bytes


class SlackFiles:
    """The fake's file endpoints; ``base`` is its root URL (``http://127.0.0.1:port``)."""

    def __init__(self, bot_token: str) -> None:
        self._token = bot_token
        self._ids = itertools.count(1)
        self._uploads: dict[str, tuple[str, bytes]] = {}  # file id -> name, bytes (uploaded)
        self._offered: dict[str, bytes] = {}  # file id -> bytes a person shared
        self.base = ""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files-pri/{file_id}/{name}", self._download)

    def upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        """``files.getUploadURLExternal``: a file id and where its bytes go."""
        if not params.get("filename") or not str(params.get("length", "")).isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{next(self._ids):08d}"
        self._uploads[file_id] = (str(params["filename"]), b"")
        return {"ok": True, "file_id": file_id, "upload_url": f"{self.base}/upload/{file_id}"}

    def complete(self, params: dict[str, Any]) -> list[SharedFile] | str:
        """``files.completeUploadExternal``: the files it shares, or Slack's error."""
        wanted = json.loads(str(params.get("files") or "[]"))
        shared = []
        for entry in wanted:
            name, data = self._uploads.get(str(entry.get("id")), ("", b""))
            if not data:
                return "file_not_found"
            shared.append(SharedFile(name, str(entry.get("title") or name), data))
        return shared or "invalid_arguments"

    def offer(self, data: bytes, name: str, mimetype: str) -> dict[str, Any]:
        """A file a person shares: its entry in the message event's ``files``."""
        file_id = f"F{next(self._ids):08d}"
        self._offered[file_id] = data
        url = f"{self.base}/files-pri/{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": url,
            "url_private_download": url,
        }

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self._uploads:
            return web.Response(status=404)
        data = await request.read()
        self._uploads[file_id] = (self._uploads[file_id][0], data)
        return web.Response(text=f"OK - {len(data)}")

    async def _download(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        data = self._offered.get(request.match_info["file_id"])
        if token != self._token or data is None:  # Slack's sign-in page
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        return web.Response(body=data, content_type="application/octet-stream")
