"""Recorded payloads: redacted, size-bounded, large ones stored once by content.

A value whose JSON is short is kept inline in the record that names it. A
longer one is published once as a ``replay.blob`` event (its sha256 and its
JSON) and referenced as ``{"$blob": sha256}``; the idempotency key carries the
day (UTC), so a payload repeated all day — a history item sent with every
model request — is stored once that day and ages out with the frames that
use it (``events.retention_days``). Every value is redacted first: a known
secret never reaches the journal.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.kernel.hooks.frames import FrameSink
from core.logging_setup import REDACTOR

__all__ = ["BLOB_KEY", "BLOB_TOPIC", "INLINE_CHARS", "MISSING_KEY", "PayloadStore", "redacted"]

log = logging.getLogger("core.replay")

BLOB_TOPIC = "replay.blob"
BLOB_KEY = "$blob"
MISSING_KEY = "$missing"  # a payload that could not be journaled (over the size limit)
INLINE_CHARS = 1024
REMEMBERED = 4096  # blob keys this process knows are journaled already


def redacted(value: Any) -> tuple[Any, str]:
    """``value`` as JSON with known secrets replaced by ``***``: (value, its JSON text)."""
    text = REDACTOR.redact(json.dumps(value, sort_keys=True, default=str, ensure_ascii=False))
    return json.loads(text), text


class PayloadStore:
    """Turns values into what a record holds: inline, or a reference to a blob."""

    def __init__(self, sink: FrameSink, *, inline_chars: int = INLINE_CHARS) -> None:
        self._sink = sink
        self._inline_chars = inline_chars
        self._stored: OrderedDict[str, None] = OrderedDict()

    async def refs(self, *values: Any) -> list[Any]:
        """``ref`` of each value, their blobs published together (one group commit)."""
        return list(await asyncio.gather(*(self.ref(v) for v in values)))

    async def ref(self, value: Any) -> Any:
        """The value inline when short, else ``{"$blob": sha256}`` (published once a day)."""
        clean, text = redacted(value)
        if len(text) <= self._inline_chars:
            return clean
        sha = hashlib.sha256(text.encode()).hexdigest()
        key = f"{BLOB_TOPIC}:{sha}:{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"
        if key in self._stored:
            self._stored.move_to_end(key)
            return {BLOB_KEY: sha}
        try:
            await self._sink.publish(
                BLOB_TOPIC, "kernel", {"sha256": sha, "json": text}, idempotency_key=key
            )
        except Exception as exc:  # too large for one event, or the journal is gone
            log.warning("replay payload %s (%d chars) not journaled: %s", sha[:12], len(text), exc)
            return {MISSING_KEY: sha, "chars": len(text)}
        self._stored[key] = None
        while len(self._stored) > REMEMBERED:
            self._stored.popitem(last=False)
        return {BLOB_KEY: sha}
