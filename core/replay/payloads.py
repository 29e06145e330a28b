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
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.events.topics import RecordTopics
from core.runtime import REDACTOR

if TYPE_CHECKING:
    from core.kernel.hooks.frames import FrameSink

__all__ = [
    "BLOB_KEY",
    "DEFAULT_MAX_BYTES",
    "INLINE_CHARS",
    "MISSING_KEY",
    "Blob",
    "PayloadStore",
    "redacted",
]

log = logging.getLogger("core.replay")

BLOB_KEY = "$blob"
MISSING_KEY = "$missing"  # a payload that could not be journaled (over the size limit)
INLINE_CHARS = 1024
REMEMBERED = 4096  # blob keys this process knows are journaled already
DEFAULT_MAX_BYTES = 256 * 1024  # events.max_payload_bytes by default


def redacted(value: Any) -> tuple[Any, str]:
    """``value`` as JSON with known secrets replaced by ``***``: (value, its JSON text)."""
    text = REDACTOR.redact(json.dumps(value, sort_keys=True, default=str, ensure_ascii=False))
    return json.loads(text), text


class PayloadStore:
    """Turns values into what a record holds: inline, or a reference to a blob.

    ``stage`` computes the references at once and returns the blobs still to
    publish; ``publish_with`` publishes them together with the record that
    uses them, so a record and its new blobs share one group commit. A blob
    over ``max_bytes`` (``events.max_payload_bytes``) is never attempted: the
    record holds ``{"$missing": sha256, "chars": n}`` instead.
    """

    def __init__(
        self,
        sink: FrameSink,
        *,
        inline_chars: int = INLINE_CHARS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._sink = sink
        self._inline_chars = inline_chars
        self._max_bytes = max_bytes
        self._stored: OrderedDict[str, None] = OrderedDict()

    def stage(self, *values: Any) -> tuple[list[Any], list[Blob]]:
        """The references of ``values`` and the blobs not yet journaled today."""
        pending: list[Blob] = []
        return [self._placed(*redacted(value), pending) for value in values], pending

    def stage_all(self, values: list[Any]) -> tuple[list[Any], list[Blob]]:
        """Like ``stage``, the values redacted together: one JSON text, one pass of
        the redactor for a whole turn's record (ADR 0052)."""
        pending: list[Blob] = []
        clean, _ = redacted(values)
        placed = [
            self._placed(value, json.dumps(value, sort_keys=True, ensure_ascii=False), pending)
            for value in clean
        ]
        return placed, pending

    async def publish_with(self, pending: list[Blob], record: Awaitable[Any]) -> None:
        """Publish ``pending`` blobs and ``record`` concurrently (one group commit)."""
        await asyncio.gather(*(self._publish(blob) for blob in pending), record)

    async def refs(self, *values: Any) -> list[Any]:
        """The references of ``values``, their blobs journaled before this returns."""
        refs, pending = self.stage(*values)
        await asyncio.gather(*(self._publish(blob) for blob in pending))
        return refs

    async def ref(self, value: Any) -> Any:
        """The value inline when short, else ``{"$blob": sha256}`` (published once a day)."""
        return (await self.refs(value))[0]

    def _placed(self, clean: Any, text: str, pending: list[Blob]) -> Any:
        """The redacted ``clean`` (``text``: its JSON) inline, or a reference to its blob."""
        if len(text) <= self._inline_chars:
            return clean
        sha = hashlib.sha256(text.encode()).hexdigest()
        key = f"{RecordTopics.REPLAY_BLOB}:{sha}:{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"
        if key in self._stored:
            self._stored.move_to_end(key)
            return {BLOB_KEY: sha}
        payload = {"sha256": sha, "json": text}
        size = len(json.dumps(payload).encode())
        if size > self._max_bytes:
            log.warning(
                "replay payload %s (%d bytes) over events.max_payload_bytes: not journaled",
                sha[:12],
                size,
            )
            return {MISSING_KEY: sha, "chars": len(text)}
        self._stored[key] = None  # taken back if the publish fails
        while len(self._stored) > REMEMBERED:
            self._stored.popitem(last=False)
        pending.append(Blob(key, payload))
        return {BLOB_KEY: sha}

    async def _publish(self, blob: Blob) -> None:
        try:
            await self._sink.publish(
                RecordTopics.REPLAY_BLOB, "kernel", blob.payload, idempotency_key=blob.key
            )
        except Exception as exc:  # the journal is gone: the record will point at nothing
            self._stored.pop(blob.key, None)
            log.error("replay payload %s not journaled: %s", blob.payload["sha256"][:12], exc)


@dataclass(frozen=True, slots=True)
class Blob:
    """A payload to journal once (``replay.blob``), under its idempotency key."""

    key: str
    payload: dict[str, str]
