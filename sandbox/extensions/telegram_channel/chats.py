"""Which chat each user talks from, kept in ``data_dir/chats.json``.

Replies that the bus re-delivers after a restart must still reach the right
chat, and proactive messages need a target, so the map survives restarts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

FILE_NAME = "chats.json"


class ChatBook:
    def __init__(self, logger: logging.Logger) -> None:
        self.path: Path | None = None
        self._logger = logger
        self._chats: dict[str, int] = {}
        self.last_chat_id: int | None = None
        self._lock = asyncio.Lock()

    async def load(self, data_dir: Path) -> None:
        """Read the map from ``data_dir`` (where it is saved from now on)."""
        self.path = data_dir / FILE_NAME
        try:
            raw = await asyncio.to_thread(self.path.read_text, encoding="utf-8")
            data = json.loads(raw)
            self._chats = {str(k): int(v) for k, v in data.get("chats", {}).items()}
            last = data.get("last_chat_id")
            self.last_chat_id = int(last) if last is not None else None
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            self._logger.error(
                "%s is unreadable (%s); starting with no known chats", self.path, exc
            )

    def chat_for(self, user_id: str) -> int:
        """The user's last chat; for private chats the user id is the chat id."""
        if user_id in self._chats:
            return self._chats[user_id]
        try:
            return int(user_id)
        except ValueError:
            raise ValueError(f"no Telegram chat known for user {user_id!r}") from None

    async def remember(self, user_id: str, chat_id: int) -> None:
        async with self._lock:
            if self._chats.get(user_id) == chat_id and self.last_chat_id == chat_id:
                return
            self._chats[user_id] = chat_id
            self.last_chat_id = chat_id
            data = {"chats": self._chats, "last_chat_id": chat_id}
            if self.path is not None:
                text = json.dumps(data, indent=1)
                await asyncio.to_thread(_write_atomically, self.path, text)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
