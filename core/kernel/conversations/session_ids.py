"""Session ids: a conversation key and its generation, never ambiguous (ADR 0048).

``/new`` moves a conversation to generation N, and its session id was
``key#N`` — so the conversation ``http:dave#1`` (an HTTP client names itself
anything) read and wrote the history of ``http:dave`` after that one's first
``/new``. A session id now carries the key escaped (``%`` as ``%25``, ``#``
as ``%23``), so its only ``#`` is the one before the generation:
``http:dave%231`` and ``http:dave#1`` are different sessions. A key without
``#`` or ``%`` (Telegram chats, the terminal) keeps the ids it always had.

Ids stored before are rewritten once, at the first start of this version
(``upgraded_session_id``: the ``sessions`` component's SQLite migration 3;
PostgreSQL: its migration 2 does the same in SQL): ``X#N`` stays a renewed
session of ``X`` where conversation ``X`` has reached generation N, every
other id holding ``#`` or ``%`` was a conversation's own first session and
is escaped. Where both conversations
existed, their rows were already one history; it stays with ``X``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from core.storage import Executor

__all__ = [
    "conversation_of",
    "session_id_of",
    "upgrade_sqlite_session_ids",
    "upgraded_session_id",
]

# every table of sessions.db with a session_id column (the SDK's two, the kernel's)
_SQLITE_SESSION_TABLES = (
    "agent_sessions",
    "agent_messages",
    "hearth_turns",
    "hearth_post_turns",
    "hearth_paused_turns",
)
log = logging.getLogger("core.kernel.conversations.sessions")

_IDS_VERSION = 1  # sessions.db's user_version once its ids are escaped
_GENERATION_RE = re.compile(r"[1-9][0-9]{0,8}")  # as /new writes it: no sign, no leading 0
_UNESCAPE_RE = re.compile(r"%(25|23)")


def session_id_of(key: str, generation: int) -> str:
    """The id of conversation ``key``'s session ``generation`` (0: before any ``/new``)."""
    escaped = key.replace("%", "%25").replace("#", "%23")
    return escaped if generation == 0 else f"{escaped}#{generation}"


def conversation_of(session_id: str) -> str:
    """The conversation key of a session id (``session_id_of`` backwards)."""
    escaped = session_id.partition("#")[0]
    return _UNESCAPE_RE.sub(lambda m: "%" if m.group(1) == "25" else "#", escaped)


def upgraded_session_id(old: str, generations: Mapping[str, int]) -> str:
    """What a session id stored before ids were escaped is now; ``generations``: every
    conversation's current generation."""
    key, mark, generation = old.rpartition("#")
    if mark and _GENERATION_RE.fullmatch(generation) and int(generation) <= generations.get(key, 0):
        return session_id_of(key, int(generation))
    return session_id_of(old, 0)


async def upgrade_sqlite_session_ids(tx: Executor) -> int:
    """Rewrite the old session ids of ``sessions.db`` once: the ``sessions`` component's
    SQLite migration 3, in its transaction. A file the code before the migration
    runner already upgraded says so in ``user_version`` and is left alone. Returns
    how many distinct ids changed."""
    if int(await tx.fetch_value("PRAGMA user_version")) >= _IDS_VERSION:
        return 0
    generations = {
        str(k): int(g)
        for k, g in await tx.fetch_all("SELECT key, generation FROM hearth_conversations")
    }
    present = {
        str(row[0])
        for row in await tx.fetch_all("SELECT name FROM sqlite_master WHERE type='table'")
    }
    changed: set[str] = set()
    for table in (t for t in _SQLITE_SESSION_TABLES if t in present):
        olds = await tx.fetch_all(
            f"SELECT DISTINCT session_id FROM {table}"
            " WHERE instr(session_id, '#') > 0 OR instr(session_id, '%') > 0"
        )
        # two steps, so an id renamed to one not renamed yet never clashes on a unique key
        for (old,) in olds:
            new = upgraded_session_id(old, generations)
            if new != old:
                changed.add(old)
                await tx.execute(
                    f"UPDATE {table} SET session_id = ? WHERE session_id = ?", "\x01" + new, old
                )
        await tx.execute(
            f"UPDATE {table} SET session_id = substr(session_id, 2)"
            " WHERE substr(session_id, 1, 1) = char(1)"
        )
    await tx.execute(f"PRAGMA user_version = {_IDS_VERSION}")
    if changed:
        log.info("sessions.db: %d session ids rewritten with their key escaped", len(changed))
    return len(changed)
