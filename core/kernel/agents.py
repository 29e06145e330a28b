"""The agent side of ``ExtensionContext``, backed by the running kernel.

``KernelAgents`` gets narrow collaborators (the router's agent entry points, the
context chain, the model router, two tool lookups and the tool hooks'
interceptor), not the ``Kernel``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from core.agents.declarative import DeclarativeAgentAdapter
from core.agents.hooked import ToolWrapper
from core.agents.model_router import ModelRouter
from core.extensions.context.agent_gateway import AgentGateway
from core.extensions.contract import TurnContext
from core.extensions.loading.manifest import Manifest

CORE_TOOLS = "core_tools"


class AgentRunner(Protocol):
    """The router's agent entry points."""

    async def invoke_agent(self, prompt: str, *, source: str) -> str: ...

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str: ...


class PromptEnricher(Protocol):
    """The context chain's combined-prompt entry point."""

    async def enrich(self, prompt: str, turn: TurnContext) -> str: ...


class KernelAgents(AgentGateway):
    """Routes context calls to the router (orchestrator) and the tool lookups."""

    def __init__(
        self,
        *,
        router: AgentRunner,
        context: PromptEnricher,
        model_router: ModelRouter,
        core_tools: Callable[[], list[Any]],
        extension_tools: Callable[[str], list[Any]],
        interceptor: ToolWrapper | None = None,
    ) -> None:
        self._router = router
        self._context = context
        self._model_router = model_router
        self._core_tools = core_tools
        self._extension_tools = extension_tools
        self._interceptor = interceptor

    async def invoke_agent(self, prompt: str, *, source: str) -> str:
        return await self._router.invoke_agent(prompt, source=source)

    async def invoke_agent_streamed(
        self,
        prompt: str,
        *,
        source: str,
        on_chunk: Callable[[str], Awaitable[None]] | None,
        on_tool_call: Callable[[str], Awaitable[None]] | None,
    ) -> str:
        return await self._router.invoke_agent_streamed(
            prompt, source=source, on_chunk=on_chunk, on_tool_call=on_tool_call
        )

    async def enrich_prompt(self, prompt: str, agent_id: str | None) -> str:
        return await self._context.enrich(prompt, TurnContext(agent_id=agent_id or "orchestrator"))

    def resolve_tools(self, uses_tools: list[str]) -> list[Any]:
        """Tools named by ``uses_tools``: extension ids (active ones), or ``core_tools``."""
        tools: list[Any] = []
        for name in uses_tools:
            tools.extend(self._core_tools() if name == CORE_TOOLS else self._extension_tools(name))
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

        return DeclarativeAgentAdapter(
            manifest, ext_dir, self.model_router, tools, self._interceptor
        )

    @property
    def model_router(self) -> ModelRouter:
        return self._model_router
