"""Frames: every hook decision that changes something, journaled on the bus.

A frame is an event on ``hook.<kind>`` (``hook.input``, ``hook.short_circuit``,
``hook.tag``, ``hook.output``, ``hook.plain_text``, ``hook.tool_call``,
``hook.tool_result``, ``hook.routing``, ``hook.compaction``,
``hook.prompt``; consent's ``hook.approval``, ``hook.ui``, ``hook.guardrail``)
published by the kernel (source ``kernel``) with the turn id as correlation id.
The payload names the extension (``owner``), the hook, the turn and session,
and holds ``before`` and ``after`` inline — or, for a value whose JSON is
longer than ``INLINE_LIMIT``, a digest (``{"sha256", "chars", "head"}``) — so
a later replay can check each hook against what it decided. Extensions cannot publish on ``hook.*``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Protocol

from core.events.topics import RecordTopics
from core.extensions.contract import TurnContext

__all__ = ["INLINE_LIMIT", "FrameRecorder", "FrameSink", "digest"]

log = logging.getLogger("core.kernel.hooks")

INLINE_LIMIT = 32 * 1024
FRAME_SOURCE = "kernel"


class FrameSink(Protocol):
    """What frames are published to: the event bus."""

    async def publish(
        self,
        topic: str,
        source: str,
        payload: dict[str, Any],
        *,
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> int: ...


def digest(value: Any) -> Any:
    """``value`` itself when its JSON is small, else its sha256, length and head."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    if len(text) <= INLINE_LIMIT:
        return value
    return {
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "chars": len(text),
        "head": text[:512],
    }


class FrameRecorder:
    """Publishes frames; a frame that cannot be journaled is logged, never fatal."""

    def __init__(self, sink: FrameSink) -> None:
        self._sink = sink

    async def record(
        self,
        kind: str,
        owner: str,
        hook: str,
        turn: TurnContext,
        *,
        before: Any = None,
        after: Any = None,
        **details: Any,
    ) -> None:
        payload: dict[str, Any] = {
            "owner": owner,
            "hook": hook,
            "turn_id": turn.turn_id,
            "session_id": turn.session_id,
            "channel_id": turn.channel_id,
            "user_id": turn.user_id,
            "agent_id": turn.agent_id,
            "before": digest(before),
            "after": digest(after),
            **{key: digest(value) for key, value in details.items()},
        }
        try:
            await self._sink.publish(
                RecordTopics.HOOK_PREFIX + kind, FRAME_SOURCE, payload, correlation_id=turn.turn_id
            )
        except Exception as exc:  # the decision stands; only its record is missing
            log.error("frame %s of %s (%s) not journaled: %s", kind, owner, hook, exc)
