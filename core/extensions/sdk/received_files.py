"""A file a person sent a channel, kept for them: one way for every channel.

Each channel fetches the file its own way (a platform download, a mail's
attachment); what follows is the same everywhere (ADR 0096): the bytes go to
a private ``inbox`` under the channel's data dir, the kernel keeps them for
the person who sent them (``ExtensionContext.keep_file``, which refuses one
over ``files.max_bytes`` in words naming the limit), the person is told when
a file was not taken, and the inbox copy is removed either way.
"""

from __future__ import annotations

import asyncio
import mimetypes
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

from core.extensions.contract import ExtensionContext

__all__ = ["INBOX", "Refuse", "inbox_path", "keep_bytes", "keep_path", "mime_type_of"]

INBOX = "inbox"  # under the channel's data dir; each file is removed once kept
Refuse = Callable[[str], Awaitable[object]]  # tells the person why a file was not taken


def mime_type_of(name: str, given: str | None = None) -> str:
    """The type the platform gave (its parameters dropped), else the name's, else
    ``application/octet-stream``."""
    stated = (given or "").split(";")[0].strip()
    return stated or mimetypes.guess_type(name)[0] or "application/octet-stream"


def inbox_path(data_dir: Path, name: str) -> Path:
    """A fresh path for ``name`` in the data dir's inbox (made if missing)."""
    inbox = data_dir / INBOX
    inbox.mkdir(parents=True, exist_ok=True)
    return inbox / f"{secrets.token_hex(8)}-{name}"


async def keep_path(
    context: ExtensionContext, user_id: str, name: str, mime_type: str, path: Path, refuse: Refuse
) -> str | None:
    """The kept file's id for the person ``user_id`` (the sender, not a room or
    group the file came in), or ``None`` when the kernel refused it (the person is
    told, in the kernel's words); ``path`` is removed either way."""
    try:
        return (await context.keep_file(user_id, name, mime_type, str(path))).file_id
    except ValueError as exc:  # over files.max_bytes: the kernel's words name the limit
        await refuse(f"I could not take {exc}")
        return None
    finally:
        await asyncio.to_thread(path.unlink, True)


async def keep_bytes(
    context: ExtensionContext, user_id: str, name: str, mime_type: str, data: bytes, refuse: Refuse
) -> str | None:
    """``keep_path`` for a file fetched into memory."""

    def write() -> Path:
        path = inbox_path(context.data_dir, name)
        path.write_bytes(data)
        return path

    path = await asyncio.to_thread(write)
    return await keep_path(context, user_id, name, mime_type, path, refuse)
