"""Pairing: an unknown sender on any channel is given a one-time code, and the
owner's ``/pair CODE`` admits them (SPEC §11; the way OpenClaw pairs unknown senders).

Each channel keeps one ``Pairings``: a stranger writing to it gets one code and
nothing else (no message of theirs reaches the kernel), and is not told again
while the code lives (``CODE_TTL_S``); at most ``MAX_OPEN`` codes are out per
channel, so a flood of strangers costs a few replies. The admitted sender ids are
kept in ``paired.json`` in the channel's data dir, so an admission survives a
restart. An admitted sender is a member of their own (the kernel's ``people:``
may name them by the identity ``PREFIX:ID``). Codes live in memory only: a
restart voids them, and the stranger asks again.

``/pair`` is the kernel's, one command for every channel: a channel
``register``\\ s its ``Pairings`` with a greeting for the admitted sender, and
``admit_anywhere`` finds the channel that gave the code. Codes are drawn so that
no two open codes of the process are equal, whatever the channel.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

__all__ = ["CODE_TTL_S", "MAX_OPEN", "WELCOME", "Greeting", "Pairings", "admit_anywhere"]

CODE_TTL_S = 600.0
MAX_OPEN = 20
FILE = "paired.json"
WELCOME = "You are in: Hearth answers you now."
"""What a channel's greeting tells the sender ``/pair`` admitted."""

Greeting = Callable[[str], Awaitable[None]]
"""Tells a newly admitted sender (by id) that they are in."""

_desk: dict[str, tuple[Pairings, Greeting]] = {}  # identity prefix -> its channel's pairings


class Pairings:
    """One channel's open codes (in memory) and admitted sender ids (``paired.json``).

    ``label`` names the channel in the owner's answer (``Telegram``) and
    ``prefix`` is its identity prefix in ``people:`` (``telegram``)."""

    def __init__(self, data_dir: Path, *, label: str, prefix: str) -> None:
        self.path = data_dir / FILE
        self.label = label
        self.prefix = prefix
        self.admitted: set[str] = set()  # shared with the channel's allow-list
        self._codes: dict[str, tuple[str, float]] = {}  # code -> (sender id, expires at)

    def load(self) -> None:
        """Read the admitted ids (none when the file does not exist yet)."""
        if self.path.exists():
            ids = json.loads(self.path.read_text(encoding="utf-8")).get("user_ids", [])
            self.admitted.update(str(i) for i in ids)

    def register(self, greet: Greeting) -> None:
        """Answer the kernel's ``/pair`` for this channel's codes (until ``unregister``)."""
        _desk[self.prefix] = (self, greet)

    def unregister(self) -> None:
        """The channel stopped: its codes are no longer answered."""
        if _desk.get(self.prefix, (None,))[0] is self:
            del _desk[self.prefix]

    def offer(self, sender_id: str, now: float | None = None) -> str | None:
        """A new code for ``sender_id``; ``None`` when they hold a live one already or
        too many are open (nothing is sent then)."""
        now = time.time() if now is None else now
        self._codes = {c: (u, t) for c, (u, t) in self._codes.items() if t > now}
        if len(self._codes) >= MAX_OPEN or any(u == sender_id for u, _ in self._codes.values()):
            return None
        code = _fresh_code(self._codes)
        self._codes[code] = (sender_id, now + CODE_TTL_S)
        return code

    def invite(self, sender_id: str) -> str | None:
        """A new code for ``sender_id`` (as ``offer``), worded as the one message the
        stranger is sent; ``None``: nothing is sent."""
        code = self.offer(sender_id)
        if code is None:
            return None
        minutes = round(CODE_TTL_S / 60)
        return (
            f"Hearth does not know you yet. Ask its owner to send /pair {code} "
            f"(the code works once, for {minutes} minutes)."
        )

    def holds(self, code: str, now: float | None = None) -> bool:
        """Whether ``code`` is one of this channel's live codes."""
        now = time.time() if now is None else now
        return self._codes.get(code.strip(), ("", 0.0))[1] > now

    async def admit(self, code: str, now: float | None = None) -> str | None:
        """The sender a live ``code`` was given to, admitted and written down; ``None``
        for an unknown or expired code (a code is used once)."""
        now = time.time() if now is None else now
        sender_id, expires = self._codes.pop(code.strip(), ("", 0.0))
        if expires <= now:
            return None
        self.admitted.add(sender_id)
        await asyncio.to_thread(self._write)
        return sender_id

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"user_ids": sorted(self.admitted)}), encoding="utf-8")
        os.replace(temporary, self.path)


def _fresh_code(taken: dict[str, tuple[str, float]]) -> str:
    while True:
        code = f"{secrets.randbelow(10**6):06d}"
        if code not in taken and not any(p.holds(code) for p, _ in _desk.values()):
            return code


async def admit_anywhere(code: str) -> str:
    """The kernel's answer to the owner's ``/pair CODE``: the channel that gave the
    code admits its holder and greets them."""
    for pairings, greet in list(_desk.values()):
        if pairings.holds(code):
            sender_id = await pairings.admit(code)
            if sender_id is not None:
                await greet(sender_id)
                return (
                    f"Paired {pairings.label} user {sender_id}: a member of their own "
                    f"({pairings.prefix}:{sender_id})."
                )
    return f"No open pairing code {code} (a code works once, for a while)."
