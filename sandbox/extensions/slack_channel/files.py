"""Files on Slack (ADR 0096): a tool's file uploaded into the conversation, and
the files a person shares fetched for the kernel to keep.

Out: slack_sdk's ``files_upload_v2`` — ``files.getUploadURLExternal``, the
bytes to that URL, then ``files.completeUploadExternal`` sharing the file in
the channel (or thread) with the caption as its comment; Slack shows a
picture inline, anything else as a download (the app needs ``files:write``).
In: each entry of a message's ``files`` is fetched from its
``url_private_download`` with the bot token (the app needs ``files:read``;
without it Slack answers with its sign-in page, which is refused so), written
to ``<data dir>/inbox`` and handed to ``keep_file``, which refuses one over
``files.max_bytes`` with the limit named — the same text as Telegram's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from core.extensions.contract import ExtensionContext, KeptFile
from core.extensions.sdk import Refuse, keep_bytes, mime_type_of

from .sender import Sender
from .targets import Target

FETCH_TIMEOUT_S = 120.0
NO_SCOPE = "Slack did not hand it over (the app needs the files:read scope)"


async def send_file(sender: Sender, target: Target, file: KeptFile) -> None:
    """Upload ``file`` and share it where ``target`` posts, the caption as its comment."""
    data = await asyncio.to_thread(Path(file.path).read_bytes)
    arguments: dict[str, Any] = {
        "channel": await sender.channel_of(target),
        "file": data,
        "filename": file.name,
        "title": file.name,
    }
    if file.caption:
        arguments["initial_comment"] = file.caption
    if target.thread_ts:
        arguments["thread_ts"] = target.thread_ts
    await sender.client.files_upload_v2(**arguments)


async def keep_shared(
    context: ExtensionContext, token: str, files: list[dict[str, Any]], user: str, refuse: Refuse
) -> list[str]:
    """The ids of the shared ``files``, kept for the person who shared them (the Slack
    user ``user``: a channel's address is the channel's); one that cannot be fetched
    or is too large is refused (``refuse``) and left out."""
    kept: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    timeout = aiohttp.ClientTimeout(total=FETCH_TIMEOUT_S)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        for shared in files:
            name = Path(str(shared.get("name") or "")).name or f"file-{shared.get('id', '')}"
            mime_type = mime_type_of(name, str(shared.get("mimetype") or ""))
            url = str(shared.get("url_private_download") or shared.get("url_private") or "")
            try:
                data = await _fetch(session, url, mime_type)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                await refuse(f"I could not take {name}: {str(exc) or type(exc).__name__}")
                continue
            if (
                file_id := await keep_bytes(context, user, name, mime_type, data, refuse)
            ) is not None:
                kept.append(file_id)
    return kept


async def _fetch(session: aiohttp.ClientSession, url: str, mime_type: str) -> bytes:
    if not url:
        raise ValueError("Slack gave no link to it")
    async with session.get(url) as response:
        response.raise_for_status()
        if response.content_type == "text/html" and mime_type != "text/html":
            raise ValueError(NO_SCOPE)
        return await response.read()
