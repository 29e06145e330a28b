"""Reply addresses: a channel's address for a conversation, with an optional reply tag.

A channel names who a message is from (and whom the reply goes to) with a
user id, its *address* (a person, or a chat: ADR 0017). A channel that
answers every request on the connection it came in on (HTTP) must tell
concurrent requests of one conversation apart, so it sends
``"<address>#reply:<tag>"``: the kernel keys the conversation — history,
lock, ``/new`` — by the address alone, while the reply, the stream and the
turn's ``TurnContext.user_id`` carry the whole tagged id back to the channel
(ADR 0024). A user id without a well-formed tag is an address as it is.
"""

from __future__ import annotations

import re

__all__ = ["REPLY_TAG_MARK", "reply_address", "split_reply_address"]

REPLY_TAG_MARK = "#reply:"
_TAG_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def reply_address(address: str, tag: str) -> str:
    """``address`` tagged with ``tag`` (1–64 of ``A-Z a-z 0-9 _ -``; else ``ValueError``)."""
    if not _TAG_RE.fullmatch(tag):
        raise ValueError(f"reply tag {tag!r} must be 1-64 characters of A-Z, a-z, 0-9, _ and -")
    return f"{address}{REPLY_TAG_MARK}{tag}"


def split_reply_address(user_id: str) -> tuple[str, str | None]:
    """``(address, tag)`` of a user id; ``tag`` is ``None`` when it carries none."""
    address, mark, tag = user_id.rpartition(REPLY_TAG_MARK)
    if not mark or not _TAG_RE.fullmatch(tag):
        return user_id, None
    return address, tag
