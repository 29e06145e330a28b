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
from pathlib import Path

import discord

from core.extensions.contract import ExtensionContext, KeptFile
from core.extensions.sdk import Refuse, keep_bytes, mime_type_of

from .sender import MAX_MESSAGE_UNITS, NO_PINGS, Sender
from .targets import Target


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
        try:
            data = await attachment.read()
        except discord.HTTPException as exc:
            await refuse(f"I could not take {name}: {exc}")
            continue
        mime_type = mime_type_of(name, attachment.content_type)
        if (
            file_id := await keep_bytes(context, sender, name, mime_type, data, refuse)
        ) is not None:
            kept.append(file_id)
    return kept
