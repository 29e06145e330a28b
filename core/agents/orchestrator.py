"""The orchestrator: the ``agents.Agent`` that answers every chat turn.

Built fresh per turn (cheap: the template is compiled once) so the date and
time in its instructions are current and the context providers' text for this
turn is appended. Its model is resolved at that moment, so a missing model
fails the turn with ``ModelNotConfiguredError``, never the kernel start. With
an ``interceptor`` (the kernel's tool hooks) it is a ``HookedAgent``: its
tools are wrapped once here and MCP tools at each step of a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agents import Agent, AgentHooks, InputGuardrail, ModelSettings, OutputGuardrail, Tool

from core.agents.hooked import HookedAgent, ToolWrapper
from core.agents.model_router import ModelRouter
from core.agents.prompts import PromptTemplate
from core.agents.toolset import Capability, capabilities_summary
from core.config import PROJECT_ROOT
from core.tools.clock import now_in, resolve_timezone, timezone_label
from core.tools.failures import tool_error_message

if TYPE_CHECKING:
    from agents.mcp import MCPServer

__all__ = ["ORCHESTRATOR_ID", "ORCHESTRATOR_TEMPLATE", "GuardrailSource", "Orchestrator"]

ORCHESTRATOR_ID = "orchestrator"
ORCHESTRATOR_TEMPLATE = PROJECT_ROOT / "prompts" / "orchestrator.jinja2"


class GuardrailSource(Protocol):
    """The extensions' guardrails for one turn's orchestrator (``TurnGuardrails``)."""

    def input_guardrails(self) -> list[InputGuardrail[Any]]: ...

    def output_guardrails(self) -> list[OutputGuardrail[Any]]: ...


class Orchestrator:
    """Builds the orchestrator ``Agent`` for one turn."""

    def __init__(
        self,
        *,
        model_router: ModelRouter,
        timezone: str,
        tools: Sequence[Tool],
        agent_tools: Sequence[Tool] = (),
        capabilities: Sequence[Capability] = (),
        mcp_servers: Sequence[MCPServer] = (),
        tool_guidance: str = "",
        template_path: Path = ORCHESTRATOR_TEMPLATE,
        interceptor: ToolWrapper | None = None,
        agent_hooks: AgentHooks[Any] | None = None,
        guardrails: GuardrailSource | None = None,
    ) -> None:
        resolve_timezone(timezone)  # a bad name fails here, not in the middle of a turn
        self._router = model_router
        self._agent_hooks = agent_hooks  # e.g. the kernel's token counter (metrics)
        self._timezone = timezone
        self._interceptor = interceptor
        self._guardrails = guardrails
        self._tools: list[Tool] = [*tools, *agent_tools]
        if interceptor is not None:
            self._tools = [interceptor.wrap(tool) for tool in self._tools]
        self._capabilities = list(capabilities)
        summary = capabilities_summary(self._capabilities)
        self._summary = f"{summary}\n\n{tool_guidance}" if tool_guidance else summary
        self._mcp_servers = list(mcp_servers)
        self._template = PromptTemplate(template_path)

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools)

    @property
    def capabilities(self) -> list[Capability]:
        return list(self._capabilities)

    def instructions(
        self, extra_instructions: str | None = None, *, system_prefix: str | None = None
    ) -> str:
        """``system_prefix``, the system prompt for a turn starting now, then
        ``extra_instructions``."""
        now = now_in(self._timezone)
        text = self._template.render(
            now=now.strftime("%Y-%m-%d %H:%M"),
            weekday=now.strftime("%A"),
            timezone=timezone_label(self._timezone, now),
            capabilities=self._summary,
        )
        parts = [(system_prefix or "").strip(), text, (extra_instructions or "").strip()]
        return "\n\n".join(part for part in parts if part)

    def agent(
        self,
        extra_instructions: str | None = None,
        *,
        system_prefix: str | None = None,
        model_name: str | None = None,
    ) -> Agent[Any]:
        """The orchestrator for one turn; raises ``ModelNotConfiguredError`` without a model.

        ``model_name`` (a routing hook's decision) replaces the configured model.
        """
        model = self._router.get_model(ORCHESTRATOR_ID, model_name)
        guardrails = self._guardrails
        return HookedAgent(
            name="Hearth",
            instructions=self.instructions(extra_instructions, system_prefix=system_prefix),
            model=model,
            tools=list(self._tools),
            mcp_servers=list(self._mcp_servers),
            mcp_config={"failure_error_function": tool_error_message},
            tool_wrapper=self._interceptor,
            hooks=self._agent_hooks,
            # streamed calls report their tokens too (the SDK asks only api.openai.com
            # by itself): a turn's usage is the same streamed or not
            model_settings=ModelSettings(include_usage=True),
            input_guardrails=guardrails.input_guardrails() if guardrails else [],
            output_guardrails=guardrails.output_guardrails() if guardrails else [],
        )
