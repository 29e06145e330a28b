"""The orchestrator's tools, stacked by name (ADR 0027): core tools, wired
extensions' tools and their agents in ``integration_mode: tool``.

``ToolStacking`` feeds ``core.extensions.loading.stacking`` the kernel's facts — who
is established (``NamePolicy``), manifest priorities, ``tools.overrides`` —
and hands the survivors to ``build_toolset``. ``/status`` and ``extensions
--json`` read the same stacks, so what they show is what the model gets.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Tool

from core.agents import CORE_SOURCE, Toolset, build_toolset, tool_name_of
from core.config import ToolOverride
from core.extensions.contract import AgentProvider
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.stacking import NameStack, stack_names
from core.tools import sanitize_tool_name

__all__ = ["StackedTools", "ToolStacking", "stacks_by_extension"]

log = logging.getLogger("core.kernel.tools")


@dataclass(frozen=True, slots=True)
class _Offered:
    """A tool or a tool-mode agent under the name the model would call it by."""

    name: str
    tool: Tool | None = None
    agent: AgentProvider | None = None


@dataclass(frozen=True, slots=True)
class StackedTools:
    """The active provider's tools and agents per owner, and every name's stack."""

    tools: list[tuple[str, list[Tool]]] = field(default_factory=list)
    agents: list[tuple[str, AgentProvider]] = field(default_factory=list)
    stacks: dict[str, NameStack] = field(default_factory=dict)

    def contested(self) -> list[NameStack]:
        """Names with more than one provider, or changed by ``tools.overrides``, by name."""
        return [s for _, s in sorted(self.stacks.items()) if s.contested]


class ToolStacking:
    """Resolves the tool stacks of a set of extension records."""

    def __init__(
        self,
        names: NamePolicy,
        *,
        priority_of: Callable[[str], int],
        overrides: Mapping[str, ToolOverride],
        core_tools: Callable[[], list[Any]],
    ) -> None:
        self._names = names
        self._priority_of = priority_of
        self._overrides = overrides
        self._core_tools = core_tools

    def stacked(
        self, records: Sequence[ExtensionRecord], *, log_stacks: bool = False
    ) -> StackedTools:
        """Stacks of the core tools and ``records`` (in load order); with
        ``log_stacks`` the held-back providers are logged (once per orchestrator)."""
        sources: list[tuple[str, list[_Offered]]] = [
            (CORE_SOURCE, [_Offered(tool_name_of(t), tool=t) for t in self._core_tools()])
        ]
        for record in records:
            offered: list[_Offered] = []
            if Capability.TOOL in record.capabilities:
                offered.extend(_Offered(tool_name_of(t), tool=t) for t in record.tools)
            if Capability.AGENT in record.capabilities:
                descriptor = record.instance.get_agent_descriptor()
                if descriptor.integration_mode == "tool":
                    name = sanitize_tool_name(descriptor.name, record.ext_id)
                    offered.append(_Offered(name, agent=record.instance))
            if offered:
                sources.append((record.ext_id, offered))
        result = stack_names(
            sources, lambda o: o.name, self._names, self._priority_of, self._overrides
        )
        if log_stacks:
            for line in result.warnings:
                log.warning(line)
            for line in result.notes:
                log.info(line)
        tools = [
            (owner, [o.tool for o in items if o.tool is not None])
            for owner, items in result.sources
        ]
        agents = [
            (owner, o.agent)
            for owner, items in result.sources
            for o in items
            if o.agent is not None
        ]
        return StackedTools(tools, agents, result.stacks)

    def toolset(self, records: Sequence[ExtensionRecord]) -> Toolset:
        """The orchestrator's tools: the active provider of every name, wrapped; an
        agent's tool passes its instance's ``CallGate`` like the tools (ADR 0032)."""
        stacked = self.stacked(records, log_stacks=True)
        toolset = build_toolset(stacked.tools, stacked.agents)
        gates = {r.ext_id: r.calls for r in records if r.calls is not None}
        gate_of = {
            c.name: gates[c.extension_id]
            for c in toolset.capabilities
            if c.kind == "agent" and c.extension_id in gates
        }
        gated = [
            gate_of[name].tools([tool])[0] if (name := tool_name_of(tool)) in gate_of else tool
            for tool in toolset.agent_tools
        ]
        return dataclasses.replace(toolset, agent_tools=gated)


def stacks_by_extension(stacked: StackedTools) -> dict[str, dict[str, dict[str, Any]]]:
    """``extensions --json``: ``{ext id: {tool: {active, shadowed, disabled}}}`` for
    every contested name the extension provides."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stack in stacked.contested():
        owners = ([stack.active] if stack.active else []) + [*stack.shadowed, *stack.disabled]
        for owner in owners:
            out.setdefault(owner, {})[stack.name] = stack.as_json()
    return out
