"""An ``Agent`` whose every tool call runs the tool hooks (SPEC §9).

The SDK asks ``Agent.get_all_tools`` for the tools to offer at each step of
a run, MCP tools included (it converts them only then), and looks the
model's calls up in that list. Overriding it is the one place that sees
every tool whoever provides it, so every agent the kernel runs — the
orchestrator and declarative agents — is a ``HookedAgent``. ``tool_wrapper``
is a dataclass field, so ``agent.clone(...)`` keeps it. An agent whose tools were
wrapped where it was built (``tools_wrapped``, the orchestrator) and that has no MCP
server offers them as they are: nothing at a step is new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from agents import Agent, RunContextWrapper, Tool

__all__ = ["HookedAgent", "ToolWrapper"]


class ToolWrapper(Protocol):
    """What wraps a tool so its calls go through the hooks (``ToolInterceptor``).

    ``wrap`` must return an already wrapped tool as it is: tools may pass
    through it more than once and must still run the hooks once per call.
    """

    def wrap(self, tool: Tool) -> Tool: ...


@dataclass
class HookedAgent(Agent[Any]):
    """``Agent`` offering its tools through ``tool_wrapper`` (``None``: unchanged)."""

    tool_wrapper: ToolWrapper | None = field(default=None, kw_only=True)
    # ``tools`` passed ``tool_wrapper`` where the agent was built (the orchestrator's):
    # with no MCP server there is nothing new to wrap at a step
    tools_wrapped: bool = field(default=False, kw_only=True)

    async def get_all_tools(self, run_context: RunContextWrapper[Any]) -> list[Tool]:
        tools = await super().get_all_tools(run_context)
        wrapper = self.tool_wrapper
        if wrapper is None or (self.tools_wrapped and not self.mcp_servers):
            return tools
        return [wrapper.wrap(tool) for tool in tools]
