"""Assemble the orchestrator's tools: merge by name, wrap agents as tools, describe them.

One namespace for every tool the model sees: core tools, ``ToolProvider`` tools
and agents in ``integration_mode: tool``. The kernel settles contested names
before it gets here (``core/kernel/shaping/tool_stacking.py``, ADR 0027); what is
left is first-wins: a later tool of a name is dropped with a warning naming
both extensions, never a crash.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext

from core.extensions.contract import AgentInvocationContext, AgentProvider, TurnContext
from core.extensions.tool_failures import (
    describe_tool_error,
    reporting_failures,
    tool_error_message,
)
from core.extensions.tool_names import sanitize_tool_name

__all__ = [
    "CORE_SOURCE",
    "Capability",
    "Toolset",
    "agent_as_tool",
    "build_toolset",
    "capabilities_summary",
    "merge_tools",
    "tool_name_of",
]

log = logging.getLogger(__name__)

CORE_SOURCE = "core"
DEFAULT_AGENT_TOOL_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Capability:
    """One line of the capabilities summary the orchestrator reads."""

    name: str
    kind: Literal["tool", "agent"]
    description: str
    extension_id: str


@dataclass(frozen=True, slots=True)
class Toolset:
    """Everything the orchestrator is given, already de-duplicated."""

    tools: list[Tool] = field(default_factory=list)
    agent_tools: list[Tool] = field(default_factory=list)
    capabilities: list[Capability] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def tool_name_of(tool: Tool) -> str:
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else type(tool).__name__


def merge_tools(sources: Sequence[tuple[str, Sequence[Tool]]]) -> tuple[list[Tool], list[str]]:
    """Keep the first tool of each name (in ``sources`` order); warn about the rest."""
    kept: list[Tool] = []
    owner: dict[str, str] = {}
    warnings: list[str] = []
    for source, tools in sources:
        for tool in tools:
            name = tool_name_of(tool)
            if name in owner:
                warnings.append(
                    f"duplicate tool {name!r} from {source} ignored; {owner[name]} provides it"
                )
                continue
            owner[name] = source
            kept.append(tool)
    return kept, warnings


def agent_as_tool(
    ext_id: str,
    provider: AgentProvider,
    *,
    timeout_s: float | None = DEFAULT_AGENT_TOOL_TIMEOUT_S,
) -> FunctionTool:
    """Wrap an ``AgentProvider`` as a tool taking one ``task`` string.

    The run's context, when it is a ``TurnContext`` (``Runner.run(context=turn)``),
    is forwarded to the agent. A failed invocation becomes an ``error: …`` result
    the model can read; the tool itself never raises.
    """
    descriptor = provider.get_agent_descriptor()
    name = sanitize_tool_name(descriptor.name, ext_id)

    async def invoke(ctx: ToolContext[Any], raw_args: str) -> str:
        try:
            task = str(json.loads(raw_args or "{}").get("task", "")).strip()
        except (ValueError, AttributeError):
            return f"error: arguments for {name} must be a JSON object with a 'task' string"
        if not task:
            return f"error: {name} needs a non-empty 'task'"
        turn = ctx.context if isinstance(ctx.context, TurnContext) else None
        try:
            response = await provider.invoke(task, AgentInvocationContext(turn=turn))
        except Exception as exc:
            log.exception("agent %s (extension %s) raised", name, ext_id)
            return f"error: agent {name} failed: {describe_tool_error(exc)}"
        if response.status == "success":
            return response.content
        return f"{response.status}: {response.error or response.content}"

    return FunctionTool(
        name=name,
        description=descriptor.description or f"Agent {descriptor.name} from {ext_id}.",
        params_json_schema={
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "What the agent should do, with every detail it needs.",
                }
            },
            "required": ["task"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
        strict_json_schema=True,
        timeout_seconds=timeout_s,
        timeout_error_function=tool_error_message,
    )


def build_toolset(
    tool_sources: Sequence[tuple[str, Sequence[Tool]]],
    agent_sources: Sequence[tuple[str, AgentProvider]] = (),
) -> Toolset:
    """Merge tools (core first), wrap ``tool``-mode agents, and describe what survived.

    ``tool_sources``: ``(extension id, tools)`` in load order, core tools first
    (source ``"core"``). ``agent_sources``: ``(extension id, provider)``; agents in
    ``handoff`` mode are skipped. Agent tools share the tools' namespace. Every
    tool reports its failures to the model as a short message (``reporting_failures``).
    """
    tool_sources = [(source, [reporting_failures(t) for t in ts]) for source, ts in tool_sources]
    wrapped: list[tuple[str, Sequence[Tool]]] = []
    for ext_id, provider in agent_sources:
        if provider.get_agent_descriptor().integration_mode == "tool":
            wrapped.append((ext_id, [agent_as_tool(ext_id, provider)]))
    kept, warnings = merge_tools([*tool_sources, *wrapped])
    wrapped_ids = {id(t) for _, ts in wrapped for t in ts}
    owners = {id(t): source for source, ts in reversed([*tool_sources, *wrapped]) for t in ts}
    capabilities = [
        Capability(
            tool_name_of(t),
            "agent" if id(t) in wrapped_ids else "tool",
            _description_of(t),
            owners[id(t)],
        )
        for t in kept
    ]
    tools = [t for t in kept if id(t) not in wrapped_ids]
    agent_tools = [t for t in kept if id(t) in wrapped_ids]
    for warning in warnings:
        log.warning(warning)
    return Toolset(tools, agent_tools, capabilities, warnings)


def capabilities_summary(
    capabilities: Sequence[Capability], *, loadable: Mapping[str, Sequence[str]] | None = None
) -> str:
    """The tools by extension, names only: each tool's schema carries its description,
    so the prompt does not say it twice (ADR 0097). The groups in ``loadable`` are
    sent on demand (group -> its tools not always sent): the model loads them with
    ``load_tools`` first."""
    groups: dict[str, list[str]] = {}
    for cap in capabilities:
        groups.setdefault(cap.extension_id, []).append(cap.name)
    if not groups:
        return "No tools or agents are available."
    agents = {c.name for c in capabilities if c.kind == "agent"}
    lines = []
    if loadable:
        lines.append(
            "Tool groups (call load_tools with the groups you need first; their tools "
            "come with your next step):"
        )
    else:
        lines.append("Tools by extension (agents marked; call them as tools):")
    for group, names in groups.items():
        if loadable is not None:
            names = [n for n in names if n in loadable.get(group, ())]
        if not names:
            continue
        shown = ", ".join(f"{n} (agent)" if n in agents else n for n in names)
        lines.append(f"- {group}: {shown}")
    return "\n".join(lines)


def _description_of(tool: Tool) -> str:
    description = getattr(tool, "description", "")
    return description if isinstance(description, str) else ""
