"""What the channel keeps across restarts, in one SQLite file in its data dir.

``replies``: the reply of each request sent with an ``Idempotency-Key`` (by
its tag), so a retry gets the same answer even after a restart, and
``idempotency_keys``: the body each such tag was first sent with (another
body under it is refused); both kept ``REPLY_KEEP_S``. ``notifications``:
proactive messages for API users (reminders, messages no request waited for),
offered at ``GET /v1/notifications``; the newest ``keep`` of at most
``NOTE_KEEP_S``.
``revoked_sessions``: the web page's sessions ended by logging out, until
their cookies would have expired (``auth``). ``threads``: the digest of each
chat as a client has it after a reply, and its conversation (``threads``,
ADR 0056; ``AMBIGUOUS`` when two conversations claimed it), kept
``THREAD_KEEP_S``. ``chat``: the web page's conversation as
it was shown (its messages and replies), so a reload shows it again; the
newest ``CHAT_KEEP``. ``post_results``: the post-processor results of each
turn of this channel that asked for some (``GET /v1/postprocess/{turn_id}``,
the web page's tags), kept ``POST_KEEP_S``; ``chat_posts``: the tags a page
message carries (its post-processors and the turn their results are under).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from core.extensions.sdk import SQLiteStore

REPLY_KEEP_S = 24 * 3600.0
NOTE_KEEP_S = 7 * 86400.0
THREAD_KEEP_S = 90 * 86400.0
CHAT_KEEP = 500
POST_KEEP_S = 30 * 86400.0  # as long as the kernel keeps a turn's records
AMBIGUOUS = ""  # a chat digest two conversations claimed: it continues neither


@dataclass(frozen=True, slots=True)
class Notification:
    """``conversation`` ``None``: for every conversation (a message with no address)."""

    id: int
    conversation: str | None
    text: str
    created_at: float

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "object": "hearth.notification",
            "conversation": self.conversation,
            "text": self.text,
            "created": int(self.created_at),
        }


class ApiStore(SQLiteStore):
    SCHEMA: ClassVar[str] = """
        CREATE TABLE IF NOT EXISTS replies (
            tag TEXT PRIMARY KEY, text TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS notifications (
            id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT,
            text TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS revoked_sessions (
            session TEXT PRIMARY KEY, expires_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS idempotency_keys (
            tag TEXT PRIMARY KEY, body TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS threads (
            digest TEXT PRIMARY KEY, conversation TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS chat (
            id INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL,
            role TEXT NOT NULL, text TEXT NOT NULL, created_at REAL NOT NULL);
        CREATE INDEX IF NOT EXISTS chat_by_conversation ON chat(conversation, id);
        CREATE TABLE IF NOT EXISTS chat_posts (
            chat_id INTEGER PRIMARY KEY, turn_id TEXT NOT NULL, tags TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS post_results (
            turn_id TEXT PRIMARY KEY, conversation TEXT NOT NULL, body TEXT NOT NULL,
            created_at REAL NOT NULL);
    """

    async def prune(self, keep: int) -> None:
        now = time.time()
        await self.execute("DELETE FROM replies WHERE created_at < ?", (now - REPLY_KEEP_S,))
        await self.execute(
            "DELETE FROM idempotency_keys WHERE created_at < ?", (now - REPLY_KEEP_S,)
        )
        await self.execute("DELETE FROM threads WHERE created_at < ?", (now - THREAD_KEEP_S,))
        await self.execute("DELETE FROM post_results WHERE created_at < ?", (now - POST_KEEP_S,))
        await self.execute(
            "DELETE FROM notifications WHERE created_at < ? OR id <= "
            "(SELECT COALESCE(MAX(id), 0) FROM notifications) - ?",
            (now - NOTE_KEEP_S, keep),
        )

    async def keep_thread(self, digest: str, conversation: str) -> None:
        """``digest`` continues ``conversation``; claimed by another one already, it
        becomes ``AMBIGUOUS``."""
        await self.execute(
            "INSERT INTO threads(digest, conversation, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT(digest) DO UPDATE SET created_at = excluded.created_at,"
            " conversation = CASE WHEN threads.conversation = excluded.conversation"
            " THEN threads.conversation ELSE ? END",
            (digest, conversation, time.time(), AMBIGUOUS),
        )

    async def bind_key(self, tag: str, body: str) -> str:
        """The body ``tag`` is bound to: ``body``, unless a request sent it first with
        another."""
        await self.execute(
            "INSERT OR IGNORE INTO idempotency_keys(tag, body, created_at) VALUES (?, ?, ?)",
            (tag, body, time.time()),
        )
        row = await self.fetch_one("SELECT body FROM idempotency_keys WHERE tag = ?", (tag,))
        return body if row is None else str(row[0])

    async def thread(self, digest: str) -> str | None:
        row = await self.fetch_one("SELECT conversation FROM threads WHERE digest = ?", (digest,))
        return None if row is None else str(row[0])

    async def add_chat(self, conversation: str, role: str, text: str) -> int:
        """Keep one message of the page's chat; its row id (``tag_chat``)."""
        row = await self.execute_insert(
            "INSERT INTO chat(conversation, role, text, created_at) VALUES (?, ?, ?, ?)",
            (conversation, role, text, time.time()),
        )
        await self.execute(
            "DELETE FROM chat WHERE conversation = ? AND id <= "
            "(SELECT COALESCE(MAX(id), 0) FROM chat WHERE conversation = ?) - ?",
            (conversation, conversation, CHAT_KEEP),
        )
        await self.execute("DELETE FROM chat_posts WHERE chat_id NOT IN (SELECT id FROM chat)")
        return row

    async def tag_chat(self, chat_id: int, turn_id: str, tags: list[dict[str, Any]]) -> None:
        """The post-processor tags message ``chat_id`` carries, and their turn."""
        await self.execute(
            "INSERT OR REPLACE INTO chat_posts(chat_id, turn_id, tags) VALUES (?, ?, ?)",
            (chat_id, turn_id, json.dumps(tags)),
        )

    async def chat(self, conversation: str) -> list[dict[str, object]]:
        """The conversation as the page showed it, oldest first; a message that ran
        post-processors carries ``postprocess``: its turn and tags."""
        rows = await self.fetch_all(
            "SELECT c.role, c.text, c.created_at, p.turn_id, p.tags FROM chat c"
            " LEFT JOIN chat_posts p ON p.chat_id = c.id WHERE c.conversation = ? ORDER BY c.id",
            (conversation,),
        )
        found: list[dict[str, object]] = []
        for role, text, at, turn_id, tags in rows:
            item: dict[str, object] = {"role": role, "text": text, "created": int(at)}
            if turn_id is not None:
                item["postprocess"] = {"turn_id": turn_id, "tags": json.loads(str(tags))}
            found.append(item)
        return found

    async def keep_post_results(
        self, turn_id: str, conversation: str, body: dict[str, Any]
    ) -> None:
        await self.execute(
            "INSERT OR REPLACE INTO post_results(turn_id, conversation, body, created_at)"
            " VALUES (?, ?, ?, ?)",
            (turn_id, conversation, json.dumps(body, default=str), time.time()),
        )

    async def post_results(self, turn_id: str) -> dict[str, Any] | None:
        row = await self.fetch_one("SELECT body FROM post_results WHERE turn_id = ?", (turn_id,))
        return None if row is None else dict(json.loads(str(row[0])))

    async def revoke_session(self, session: str, expires_at: float) -> None:
        await self.execute(
            "INSERT OR IGNORE INTO revoked_sessions(session, expires_at) VALUES (?, ?)",
            (session, expires_at),
        )

    async def revoked_sessions(self) -> list[str]:
        """Sessions ended by a logout whose cookies have not expired yet."""
        await self.execute("DELETE FROM revoked_sessions WHERE expires_at < ?", (time.time(),))
        rows = await self.fetch_all("SELECT session FROM revoked_sessions")
        return [str(row[0]) for row in rows]

    async def keep_reply(self, tag: str, text: str) -> None:
        await self.execute(
            "INSERT OR IGNORE INTO replies(tag, text, created_at) VALUES (?, ?, ?)",
            (tag, text, time.time()),
        )

    async def reply(self, tag: str) -> str | None:
        row = await self.fetch_one("SELECT text FROM replies WHERE tag = ?", (tag,))
        return None if row is None else str(row[0])

    async def add_notification(self, conversation: str | None, text: str) -> Notification:
        now = time.time()
        note_id = await self.execute_insert(
            "INSERT INTO notifications(conversation, text, created_at) VALUES (?, ?, ?)",
            (conversation, text, now),
        )
        return Notification(note_id, conversation, text, now)

    async def notifications(
        self, after: int, conversation: str | None, limit: int
    ) -> list[Notification]:
        """Oldest first, newer than ``after``; for ``conversation`` (and the unaddressed
        ones), or all when it is ``None``."""
        rows = await self.fetch_all(
            "SELECT id, conversation, text, created_at FROM notifications WHERE id > ?"
            " AND (? IS NULL OR conversation IS NULL OR conversation = ?) ORDER BY id LIMIT ?",
            (after, conversation, conversation, limit),
        )
        return [Notification(int(i), c, str(t), float(at)) for i, c, t, at in rows]
