"""The agent side of ``ExtensionContext``, backed by the running kernel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.agents.declarative import DeclarativeAgentAdapter
from core.agents.model_router import ModelRouter
from core.extensions.context import AgentGateway
from core.extensions.contract import TurnContext
from core.extensions.errors import NotAvailableError
from core.extensions.manifest import Manifest

if TYPE_CHECKING:
    from core.kernel.runner import Kernel

CORE_TOOLS = "core_tools"


class KernelAgents(AgentGateway):
    """Routes context calls to the router (orchestrator) and the loader (tools)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def _router(self) -> Any:
        if self._kernel.router is None:
            raise NotAvailableError("the orchestrator is not available until the kernel starts")
        return self._kernel.router

    async def invoke_agent(self, prompt: str, *, source: str) -> str:
        result: str = await self._router().invoke_agent(prompt, source=source)
        return result

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str:
        result: str = await self._router().invoke_agent_streamed(
            prompt, source=source, on_chunk=on_chunk, on_tool_call=on_tool_call
        )
        return result

    async def enrich_prompt(self, prompt: str, agent_id: str | None) -> str:
        return await self._kernel.context.enrich(
            prompt, TurnContext(agent_id=agent_id or "orchestrator")
        )

    def resolve_tools(self, uses_tools: list[str]) -> list[Any]:
        """Tools named by ``uses_tools``: extension ids, or ``core_tools``."""
        tools: list[Any] = []
        for name in uses_tools:
            if name == CORE_TOOLS:
                tools.extend(self._kernel._core_tools())
                continue
            record = self._kernel.loader.records.get(name)
            if record is not None and record.has("ToolProvider"):
                tools.extend(record.tools)
        return tools

    def resolve_instructions(self, manifest: Manifest, ext_dir: Path) -> str:
        if manifest.agent is None:
            return ""
        return self.declared_agent(manifest, ext_dir, []).resolved_instructions

    def declared_agent(
        self, manifest: Manifest, ext_dir: Path, extra_tools: list[Any]
    ) -> DeclarativeAgentAdapter:
        """The manifest's ``agent:`` section as an agent, ``extra_tools`` first."""

        def tools(uses_tools: list[str]) -> list[Any]:
            return [*extra_tools, *self.resolve_tools(uses_tools)]

        return DeclarativeAgentAdapter(manifest, ext_dir, self.model_router, tools)

    @property
    def model_router(self) -> ModelRouter:
        return self._kernel.model_router
