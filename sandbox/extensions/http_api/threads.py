"""Which conversation a request continues, from the history the client sends (ADR 0056).

Clients like ``llm`` or Open WebUI send no ``user`` and no
``X-Hearth-Conversation``, but resend the whole chat every time. After each
answered request the channel records a digest of the chat as the client now
has it (its messages, then the reply it got) with the conversation it ran
in. A request whose messages before its newest user message have such a
digest continues that conversation; one with no earlier messages starts a new
conversation; one whose earlier messages are unknown — an edited or
regenerated earlier message, or a chat from before a restart's data loss —
branches: a new conversation whose first message carries the client's
earlier messages as a transcript, so the model sees what the client shows.
The conversation it branched from is left as it was.

The digest covers who sends the chat too (the caller: the token or the web
page's session, and the client's id when it sends one; ADR 0075), so two
clients whose chats begin alike never continue each other's conversation.
Two conversations that claim one digest (clients that cannot be told apart,
with the same chat) are continued by neither: the request branches.

System and developer messages are not part of the digest (Hearth has its own
instructions), nor are tool messages; text is compared with its outer
whitespace stripped.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

ROLES = ("user", "assistant")
BRANCH_HEAD = "(Earlier in this chat — the client's copy of it:)"
BRANCH_NEW = "(The new message:)"


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str


def normalised(messages: Sequence[tuple[str, str]]) -> list[Turn]:
    return [Turn(role, text.strip()) for role, text in messages if role in ROLES]


def digest(caller: str, turns: Sequence[Turn]) -> str:
    data = json.dumps([caller, [[t.role, t.text] for t in turns]], ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a request goes: its ``conversation`` and the text to journal there (a
    branch's first message carries the transcript)."""

    conversation: str
    text: str


def earlier(turns: list[Turn]) -> list[Turn]:
    """The messages before the newest user message."""
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].role == "user":
            return turns[:index]
    return turns


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def branch_text(before: list[Turn], newest: str) -> str:
    """The first message of a branch: the client's earlier chat, then the new message."""
    lines = [BRANCH_HEAD]
    for turn in before:
        who = "User" if turn.role == "user" else "Assistant"
        lines.append(f"{who}: {turn.text}")
    return "\n".join(lines) + f"\n\n{BRANCH_NEW}\n{newest}"


def after_reply(caller: str, turns: list[Turn], reply: str) -> str:
    """The digest of the chat as ``caller`` has it once it shows ``reply``."""
    before = earlier(turns)
    newest = turns[len(before)] if len(before) < len(turns) else None
    chat = [*before, *([newest] if newest else []), Turn("assistant", reply.strip())]
    return digest(caller, chat)
