"""Pairing: an unknown Telegram user is given a one-time code, and the owner's
``/pair CODE`` admits them (SPEC §11; the way OpenClaw pairs unknown senders).

A stranger writing to the bot in a private chat gets one code and nothing
else: no message of theirs reaches the kernel, and they are not told again
while their code lives (``CODE_TTL_S``); at most ``MAX_OPEN`` codes are out
at once, so a flood of strangers costs a few replies. The owner (the kernel
refuses ``/pair`` to anyone else) admits the holder of a code; the admitted
ids are kept in ``paired.json`` in the channel's data dir, so an admission
survives a restart. An admitted user is a member of their own (the
kernel's ``people:`` may name them: ``telegram:<id>``). Codes live in
memory only: a restart voids them, and the stranger asks again.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from pathlib import Path

__all__ = ["CODE_TTL_S", "MAX_OPEN", "Pairings"]

CODE_TTL_S = 600.0
MAX_OPEN = 20
FILE = "paired.json"


class Pairings:
    """Open codes (in memory) and admitted user ids (in ``paired.json``)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        self.admitted: set[int] = set()  # shared with the allow-list and the chat targets
        self._codes: dict[str, tuple[int, float]] = {}  # code -> (user id, expires at)

    def load(self) -> None:
        """Read the admitted ids (none when the file does not exist yet)."""
        if self.path.exists():
            ids = json.loads(self.path.read_text(encoding="utf-8")).get("user_ids", [])
            self.admitted.update(int(i) for i in ids)

    def offer(self, user_id: int, now: float | None = None) -> str | None:
        """A new code for ``user_id``; ``None`` when they hold a live one already or
        too many are open (nothing is sent then)."""
        now = time.time() if now is None else now
        self._codes = {c: (u, t) for c, (u, t) in self._codes.items() if t > now}
        if len(self._codes) >= MAX_OPEN or any(u == user_id for u, _ in self._codes.values()):
            return None
        code = f"{secrets.randbelow(10**6):06d}"
        while code in self._codes:
            code = f"{secrets.randbelow(10**6):06d}"
        self._codes[code] = (user_id, now + CODE_TTL_S)
        return code

    async def admit(self, code: str, now: float | None = None) -> int | None:
        """The user a live ``code`` was given to, admitted and written down; ``None``
        for an unknown or expired code (a code is used once)."""
        now = time.time() if now is None else now
        user_id, expires = self._codes.pop(code.strip(), (0, 0.0))
        if expires <= now:
            return None
        self.admitted.add(user_id)
        await asyncio.to_thread(self._write)
        return user_id

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"user_ids": sorted(self.admitted)}), encoding="utf-8")
        os.replace(temporary, self.path)
