"""What ``/status`` reports, read from the running kernel's parts (``StatusSource``).

Kept apart from the ``Kernel`` so assembly and reporting stay separate jobs:
``/status`` sees exactly these parts and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.agents.mcp_servers import McpServers, McpServerStatus
from core.agents.model_router import ModelRouter
from core.events import EventBus
from core.extensions.loading.loader import Loader
from core.extensions.loading.records import ExtensionRecord
from core.kernel.shaping.tool_stacking import StackedTools

__all__ = ["KernelStatusSource"]


@dataclass(frozen=True, slots=True)
class KernelStatusSource:
    """``StatusSource`` for ``/status``: uptime, model, extensions, tool stacks, MCP,
    events, consent."""

    started_at: float  # time.monotonic() at kernel start
    model_router: ModelRouter
    loader: Loader
    wired: Callable[[str], bool]
    mcp: McpServers
    bus: EventBus
    consent: Callable[[], str]
    stacks: Callable[[], StackedTools]

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self.started_at

    def model_description(self) -> str:
        """The orchestrator's chain, then what served last and what cools down."""
        lines = [self.model_router.describe("orchestrator"), *self.model_router.health_lines()]
        return "\n  ".join(lines)

    def extension_records(self) -> Sequence[ExtensionRecord]:
        return list(self.loader.records.values())

    def is_wired(self, ext_id: str) -> bool:
        return self.wired(ext_id)

    def mcp_statuses(self) -> Sequence[McpServerStatus]:
        return self.mcp.statuses()

    async def event_counts(self) -> dict[str, int]:
        return await self.bus.journal.counts()

    def consent_summary(self) -> str:
        return self.consent()

    def tool_stacks(self) -> StackedTools:
        return self.stacks()
