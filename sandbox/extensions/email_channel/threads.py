"""Mail threads as conversations: which thread a mail belongs to, and how to answer in it.

The kernel's address of a conversation is ``PERSON#THREAD`` (``alice@example.org#t1a2b3c4d5e``):
the person's address (the kernel's ``identity_of`` reads the part before
``#``, so the identity is ``email:alice@example.org``) and a key naming the
thread. A mail that answers one the thread holds (its ``In-Reply-To`` or
``References`` name one of the thread's ``Message-ID``\\ s, from the same
person) continues that conversation; any other mail — a new subject, a mail
that answers nothing known — starts a new one, keyed by its own Message-ID.

Each thread keeps what an answer needs: the subject, the ids so far (the
``References`` of the next mail) and the last one (its ``In-Reply-To``).
Threads live in ``threads.json`` in the channel's data dir, so a reply after
a restart still lands in its thread; the oldest are forgotten beyond
``MAX_THREADS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

FILE = "threads.json"
MAX_THREADS = 500
MAX_REFERENCES = 20  # the References header keeps the root and the latest ones
MARK = "#"


@dataclass
class Thread:
    key: str
    peer: str  # the person's address
    subject: str  # without any "Re:"
    ids: list[str] = field(default_factory=list)  # Message-IDs in the thread, oldest first

    @property
    def address(self) -> str:
        return f"{self.peer}{MARK}{self.key}"

    @property
    def last_id(self) -> str | None:
        return self.ids[-1] if self.ids else None

    def references(self) -> list[str]:
        """The References of the next mail: the root and the latest ids."""
        if len(self.ids) <= MAX_REFERENCES:
            return list(self.ids)
        return [self.ids[0], *self.ids[-(MAX_REFERENCES - 1) :]]

    def next_subject(self) -> str:
        """The subject of the thread's next mail: ``Re:`` once it has one."""
        subject = self.subject or "Hearth"
        return f"Re: {subject}" if self.ids else subject


def base_subject(subject: str) -> str:
    """A subject without its ``Re:``/``Fwd:``/``AW:`` prefixes."""
    return re.sub(r"^(\s*(re|fwd?|aw|sv|antw)\s*(\[\d+\])?\s*:\s*)+", "", subject, flags=re.I)


def split_address(address: str) -> tuple[str, str | None]:
    """``(person, thread key)`` of a kernel address (no key: a bare address)."""
    person, mark, key = address.partition(MARK)
    return person.strip().lower(), (key or None) if mark else None


class Threads:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE
        self._threads: dict[str, Thread] = {}  # key -> thread, oldest first
        self._by_id: dict[str, str] = {}  # Message-ID -> thread key

    def load(self) -> None:
        if not self.path.exists():
            return
        rows = json.loads(self.path.read_text(encoding="utf-8")).get("threads", [])
        for row in rows:
            self._add(Thread(**row))

    def get(self, key: str) -> Thread | None:
        return self._threads.get(key)

    def of_message(self, message_id: str) -> Thread | None:
        key = self._by_id.get(message_id)
        return self._threads.get(key) if key else None

    def place(self, peer: str, subject: str, message_id: str, parents: tuple[str, ...]) -> Thread:
        """The thread an incoming mail continues (one of ``parents`` is in it and
        it is ``peer``'s), else a new one; the mail's id is added to it."""
        for parent in parents:
            thread = self.of_message(parent)
            if thread is not None and thread.peer == peer:
                self.record(thread, message_id)
                return thread
        thread = self._threads.get(thread_key(message_id))
        if thread is None:
            thread = Thread(thread_key(message_id), peer, base_subject(subject))
            self._add(thread)
        self.record(thread, message_id)
        return thread

    def start(self, peer: str, subject: str) -> Thread:
        """A thread the channel starts (a message to a bare address); its first mail
        is recorded when sent."""
        thread = Thread("t" + secrets.token_hex(6), peer, base_subject(subject))
        self._add(thread)
        return thread

    def record(self, thread: Thread, message_id: str) -> None:
        """``message_id`` is now the thread's latest mail."""
        if message_id in thread.ids:
            return
        thread.ids.append(message_id)
        self._by_id[message_id] = thread.key
        self._threads.pop(thread.key, None)
        self._threads[thread.key] = thread  # the latest used is the last forgotten

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        rows = [asdict(t) for t in self._threads.values()]
        temporary.write_text(json.dumps({"threads": rows}), encoding="utf-8")
        os.replace(temporary, self.path)

    def _add(self, thread: Thread) -> None:
        self._threads[thread.key] = thread
        for message_id in thread.ids:
            self._by_id[message_id] = thread.key
        while len(self._threads) > MAX_THREADS:
            oldest = self._threads.pop(next(iter(self._threads)))
            for message_id in oldest.ids:
                if self._by_id.get(message_id) == oldest.key:
                    del self._by_id[message_id]


def thread_key(message_id: str) -> str:
    """A short key for the thread a mail starts (no ``#`` or spaces: it is part of an address)."""
    return "t" + hashlib.sha256(message_id.encode("utf-8")).hexdigest()[:12]
