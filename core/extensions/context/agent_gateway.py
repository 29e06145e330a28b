"""``AgentGateway``: what the context needs from the agent side.

The kernel implements it (``core.kernel.agents.KernelAgents``, over the
router); this default refuses every call until it does, so a context built
before the orchestrator exists fails with a clear ``NotAvailableError``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.extensions.errors import NotAvailableError
from core.extensions.loading.manifest import Manifest

__all__ = ["AgentGateway"]


class AgentGateway:
    """What the context needs from the agent side; implemented by the router."""

    async def invoke_agent(self, prompt: str, *, source: str) -> str:
        raise NotAvailableError("the orchestrator is not available yet")

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str:
        raise NotAvailableError("the orchestrator is not available yet")

    async def enrich_prompt(self, prompt: str, agent_id: str | None) -> str:
        raise NotAvailableError("the orchestrator is not available yet")

    def resolve_tools(self, uses_tools: list[str]) -> list[Any]:
        raise NotAvailableError("tools are not available yet")

    def resolve_instructions(self, manifest: Manifest, ext_dir: Path) -> str:
        raise NotAvailableError("agent instructions are not available yet")

    def declared_agent(self, manifest: Manifest, ext_dir: Path, extra_tools: list[Any]) -> Any:
        raise NotAvailableError("agents are not available yet")

    @property
    def model_router(self) -> Any:
        raise NotAvailableError("the model router is not available yet")
