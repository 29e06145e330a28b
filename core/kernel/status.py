"""``ExtensionContext.kernel_status`` and ``requeue_dead_letter``: what the kernel
shows an extension with ``permissions.status`` (and lets one with ``control`` do).

Built from the same ``StatusSource`` as ``/status`` plus the journal's
inspection calls, so the web page and the command never disagree.
"""

from __future__ import annotations

from core.events.journal import Journal
from core.extensions.contract.status import (
    DeadLetterState,
    DeliveryState,
    EventState,
    ExtensionState,
    KernelStatus,
    McpServerState,
)
from core.kernel.commands.builtin import StatusSource

__all__ = ["KernelOperator"]

RECENT_EVENTS = 25
DEAD_LETTERS = 50


class KernelOperator:
    """The kernel services behind the two context members."""

    def __init__(self, source: StatusSource, journal: Journal) -> None:
        self._source = source
        self._journal = journal

    async def status(self) -> KernelStatus:
        source = self._source
        records = sorted(source.extension_records(), key=lambda r: r.ext_id)
        events = await self._journal.recent_events(limit=RECENT_EVENTS)
        dead = await self._journal.dead_letters(limit=DEAD_LETTERS)
        return KernelStatus(
            uptime_s=source.uptime_s,
            model=source.model_description(),
            extensions=tuple(
                ExtensionState(r.ext_id, r.status.value, source.is_wired(r.ext_id), r.error)
                for r in records
            ),
            mcp_servers=tuple(
                McpServerState(s.name, s.describe(), s.detail) for s in source.mcp_statuses()
            ),
            event_counts=await source.event_counts(),
            recent_events=tuple(
                EventState(
                    e.id,
                    e.topic,
                    e.source,
                    e.created_at,
                    tuple(
                        DeliveryState(d.subscriber_id, d.status, d.attempt, d.error)
                        for d in e.deliveries
                    ),
                )
                for e in events
            ),
            dead_letters=tuple(
                DeadLetterState(
                    d.event_id,
                    d.subscriber_id,
                    d.topic,
                    d.source,
                    d.attempt,
                    d.error,
                    d.created_at,
                    d.failed_at,
                )
                for d in dead
            ),
        )

    async def requeue(self, event_id: int) -> int:
        """Dead deliveries of ``event_id`` back to pending; how many (0: none was dead)."""
        return await self._journal.requeue(event_id)
