"""Files on Discord (ADR 0096): a tool's file sent as a message attachment, and
the attachments a person sends fetched for the kernel to keep.

Out: one message carrying the file (``discord.File``, multipart upload) with
the caption as its text; Discord shows a picture inline, anything else as a
download. In: each attachment of a message is read from Discord's CDN
(``Attachment.read``), written to ``<data dir>/inbox`` and handed to
``keep_file``, which refuses one over ``files.max_bytes`` with the limit
named — the same refusal text as Telegram's, sent back where it came from.
"""

from __future__ import annotations

import asyncio
import io
import mimetypes
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

import discord

from core.extensions.contract import ExtensionContext, KeptFile

from .sender import MAX_MESSAGE_UNITS, NO_PINGS, Sender
from .targets import Target

INBOX = "inbox"  # under the channel's data dir; each fetched file is removed once kept

Refuse = Callable[[str], Awaitable[object]]  # tells the person why a file was not taken


async def send_file(sender: Sender, target: Target, file: KeptFile) -> None:
    """One message with ``file`` attached and its caption as the text."""
    data = await asyncio.to_thread(Path(file.path).read_bytes)
    channel = sender.client.get_partial_messageable(await sender.channel_id(target))
    caption = file.caption[:MAX_MESSAGE_UNITS] or None
    await sender.call(
        f"sending {file.name} to channel {channel.id}",
        lambda: channel.send(  # a fresh File per try: a sent one is read to its end
            caption,
            file=discord.File(io.BytesIO(data), filename=file.name),
            allowed_mentions=NO_PINGS,
        ),
    )


async def keep_attachments(
    context: ExtensionContext, message: discord.Message, sender: str, refuse: Refuse
) -> list[str]:
    """The ids of the message's attachments, kept for the person who sent them (the
    user id ``sender``: in a server channel the address is the channel's); one that
    cannot be fetched or is too large is refused (``refuse``) and left out."""
    kept: list[str] = []
    for attachment in message.attachments:
        name = Path(attachment.filename).name or f"attachment-{attachment.id}"
        mime_type = (
            (attachment.content_type or "").split(";")[0]
            or mimetypes.guess_type(name)[0]
            or "application/octet-stream"
        )
        try:
            data = await attachment.read()
        except discord.HTTPException as exc:
            await refuse(f"I could not take {name}: {exc}")
            continue
        path = await asyncio.to_thread(_write_inbox, context.data_dir, name, data)
        try:
            kept.append((await context.keep_file(sender, name, mime_type, str(path))).file_id)
        except ValueError as exc:  # over files.max_bytes: the kernel's words name the limit
            await refuse(f"I could not take {exc}")
        finally:
            await asyncio.to_thread(path.unlink, True)
    return kept


def _write_inbox(data_dir: Path, name: str, data: bytes) -> Path:
    inbox = data_dir / INBOX
    inbox.mkdir(parents=True, exist_ok=True)
    path = inbox / f"{secrets.token_hex(8)}-{name}"
    path.write_bytes(data)
    return path
