"""The orchestrator: the ``agents.Agent`` that answers every chat turn.

Its instructions are the stable prefix of every request (ADR 0054): the same
bytes turn after turn, so a model server can reuse its work on them. What
changes per turn — the clock (``clock``), the context providers' text, the
conditional prompt additions — is not in them: the turn runner sends it after
the history. So the ``Agent`` is built once per wiring and set of instructions
and model and reused by every turn (building one costs the SDK about 1 ms:
issue 29's profile). Its model is resolved on first use, so a missing model
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
from core.extensions.tool_failures import tool_error_message
from core.tools.clock import now_at, offset_label, resolve_timezone

if TYPE_CHECKING:
    from agents.mcp import MCPServer

__all__ = [
    "ORCHESTRATOR_ID",
    "ORCHESTRATOR_TEMPLATE",
    "GuardrailSource",
    "Orchestrator",
    "dated_clock",
]

DAY = len("Now: 2026-11-26")  # a full clock line: the day, " HH:MM", then the weekday and offset

ORCHESTRATOR_ID = "orchestrator"
ORCHESTRATOR_TEMPLATE = PROJECT_ROOT / "prompts" / "orchestrator.jinja2"
AGENTS_KEPT = 16  # built agents kept (per additions and routed model); more start over
USAGE_SETTINGS = ModelSettings(include_usage=True)


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
        skill_catalog: str = "",
        template_path: Path = ORCHESTRATOR_TEMPLATE,
        interceptor: ToolWrapper | None = None,
        agent_hooks: AgentHooks[Any] | None = None,
        guardrails: GuardrailSource | None = None,
    ) -> None:
        # resolved once: a bad name fails here, not in the middle of a turn, and a turn
        # reads no file for ``local``
        self._zone = resolve_timezone(timezone)
        self._router = model_router
        self._agent_hooks = agent_hooks  # e.g. the kernel's token counter (metrics)
        self._timezone = timezone
        self._interceptor = interceptor
        self._guardrails = guardrails
        self._tools: list[Tool] = [*tools, *agent_tools]
        if interceptor is not None:
            self._tools = [interceptor.wrap(tool) for tool in self._tools]
        self._capabilities = list(capabilities)
        view = model_router.tool_view
        view.learn((c.name, c.extension_id, c.description) for c in self._capabilities)
        loadable = view.groups() if model_router.on_demand(ORCHESTRATOR_ID) else None
        summary = capabilities_summary(self._capabilities, loadable=loadable)
        # the skills' catalog (sorted: the same bytes each turn) follows the tools
        self._summary = "\n\n".join(p for p in (summary, tool_guidance, skill_catalog) if p)
        self._mcp_servers = list(mcp_servers)
        self._agents: dict[tuple[str | None, str | None, str | None], Agent[Any]] = {}
        # rendered once: nothing in it changes until the wiring or the settings do
        self._system = PromptTemplate(template_path).render(
            timezone=_zone_name(timezone, self._zone), capabilities=self._summary
        )

    @property
    def tools(self) -> list[Tool]:
        return list(self._tools)

    @property
    def capabilities(self) -> list[Capability]:
        return list(self._capabilities)

    def instructions(
        self, extra_instructions: str | None = None, *, system_prefix: str | None = None
    ) -> str:
        """``system_prefix``, the system prompt, then ``extra_instructions``: no clock,
        nothing per turn, so the same arguments give the same bytes (ADR 0054)."""
        parts = [(system_prefix or "").strip(), self._system, (extra_instructions or "").strip()]
        return "\n\n".join(part for part in parts if part)

    def clock(self, dated: str | None = None) -> str:
        """The moment a turn starts, for the per-turn note after the history:
        ``Now: 2026-11-26 19:30 (Thursday, CET, UTC+01:00).`` The zone's name is in
        the system prompt; the note holds only what changes (every token of it is
        read anew each turn by a model server reusing the prompt, ADR 0054): where
        the kept history's last full clock line (``dated``, ``dated_clock``) names
        the same day and offset, only the time, ``Now: 19:42.`` (ADR 0097)."""
        now = now_at(self._zone)
        full = f"Now: {now:%Y-%m-%d %H:%M} ({now:%A}, {offset_label(self._timezone, now)})."
        if dated and dated[:DAY] == full[:DAY] and dated[DAY + 6 :] == full[DAY + 6 :]:
            return f"Now: {now:%H:%M}."
        return full

    def agent(
        self,
        extra_instructions: str | None = None,
        *,
        system_prefix: str | None = None,
        model_name: str | None = None,
    ) -> Agent[Any]:
        """The orchestrator for a turn; raises ``ModelNotConfiguredError`` without a model.

        ``model_name`` (a routing hook's decision) replaces the configured model. The
        same arguments give the same agent: nothing in it changes from turn to turn
        (the turn's context is the run's, tools read it from there).
        """
        key = (extra_instructions, system_prefix, model_name)
        built = self._agents.get(key)
        if built is None:
            built = self._build(extra_instructions, system_prefix, model_name)
            if len(self._agents) >= AGENTS_KEPT:
                self._agents.clear()
            self._agents[key] = built
        return built

    def _build(
        self, extra_instructions: str | None, system_prefix: str | None, model_name: str | None
    ) -> Agent[Any]:
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
            tools_wrapped=self._interceptor is not None,  # here, once (``__init__``)
            hooks=self._agent_hooks,
            # streamed answers report their tokens too (``stream_options.include_usage``,
            # which the SDK asks only of OpenAI's own API by default): /usage, the budget
            model_settings=USAGE_SETTINGS,
            input_guardrails=guardrails.input_guardrails() if guardrails else [],
            output_guardrails=guardrails.output_guardrails() if guardrails else [],
        )


def dated_clock(history: Sequence[Any]) -> str | None:
    """The last full clock line among the turn notes kept in ``history`` (a system
    message that starts with one), or None: with it a turn's note can say the time
    alone. Read from the end: the latest note is a turn or a few back."""
    for item in reversed(history):
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str) and item.get("role") == "system":
            line = content.split("\n", 1)[0]
            if line.startswith("Now: ") and len(line) > DAY + 6 and line[DAY] == " ":
                return line
    return None


def _zone_name(timezone: str, zone: Any) -> str:
    """The zone as the prompt names it: ``local`` is this machine's zone by its name
    (``Europe/Berlin``), which a model understands where "local" says nothing."""
    if timezone != "local":
        return timezone
    key = getattr(zone, "key", None)
    return key if key and key != "localtime" else "this machine's local time"
