"""Tool schemas on demand: a small stable prompt for a model on the user's machine (ADR 0097).

A local model reads every token of the prompt's prefix on CPU: with every bundled
extension on, the tools' schemas were three quarters of ~4,000 tokens. With
``tool_schemas: on_demand`` (``auto``: for a server on this machine) a request
carries only the *resident* tools (``tools.resident``, and ``load_tools``)
while the system prompt lists every tool group by name; the model calls
``load_tools`` with the groups it needs, and from the next request on their
schemas come with it. Which groups are loaded is read from the request's own
input — a ``load_tools`` call in the conversation keeps its groups for the rest
of it — so the view holds no per-turn state, and the tools a conversation uses
stay, in the order they were loaded (the prefix grows at its end and stays
stable after). Only what is *sent* is filtered: every tool stays callable, so
a model that calls one it was not shown still gets it run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from agents import FunctionTool, Tool, function_tool
from agents.models.interface import Model

from core.extensions.sdk import side_effects
from core.extensions.tool_failures import tool_error_message

__all__ = ["LOAD_TOOLS", "OnDemandModel", "ToolView", "load_tools_tool"]

LOAD_TOOLS = "load_tools"


class ToolView:
    """Which tool belongs to which group (an extension's id, ``core`` for the
    kernel's), and which are always sent."""

    def __init__(self, resident: Iterable[str] = ()) -> None:
        self.resident = frozenset(resident) | {LOAD_TOOLS}
        self._group_of: dict[str, str] = {}
        self._descriptions: dict[str, str] = {}

    def learn(self, tools: Iterable[tuple[str, str, str]]) -> None:
        """``(tool name, group, description)`` of the orchestrator's tools (its wiring);
        read once (a generator is welcome)."""
        tools = list(tools)
        self._group_of = {name: group for name, group, _ in tools}
        self._descriptions = {name: " ".join(text.split()) for name, _, text in tools}

    def groups(self) -> dict[str, list[str]]:
        """Group -> its tools not sent unless loaded, in the orchestrator's order."""
        found: dict[str, list[str]] = {}
        for name, group in self._group_of.items():
            if not self._resident(name, group):
                found.setdefault(group, []).append(name)
        return found

    def _resident(self, name: str, group: str) -> bool:
        return name in self.resident or group in self.resident

    def visible(self, tools: Sequence[Tool], given: str | list[Any]) -> list[Tool]:
        """The tools a request sends: the resident ones, then those of the groups
        loaded in ``given`` (the request's input), in the order they were loaded."""
        loaded = _loaded_groups(given)
        order = {group: index for index, group in enumerate(loaded)}
        shown: list[Tool] = []
        later: list[tuple[int, int, Tool]] = []
        for index, tool in enumerate(tools):
            name = getattr(tool, "name", "")
            group = self._group_of.get(name)
            if group is None or self._resident(name, group):
                shown.append(tool)  # not the orchestrator's (an MCP tool) or resident
            elif group in order:
                later.append((order[group], index, tool))
        return shown + [tool for _, _, tool in sorted(later, key=lambda t: (t[0], t[1]))]

    def describe(self, requested: Sequence[str]) -> str:
        """``load_tools``' answer: each group's tools with their one-line purpose."""
        groups = self.groups()
        lines: list[str] = []
        unknown = [g for g in requested if g not in groups]
        for group in [g for g in requested if g in groups]:
            lines.append(f"{group} is loaded; call its tools now:")
            lines.extend(
                f"- {n}: {_first_sentence(self._descriptions.get(n, ''))}" for n in groups[group]
            )
        if unknown:
            lines.append(
                f"No tool group {', '.join(unknown)}; the groups are: {', '.join(sorted(groups))}"
            )
        return "\n".join(lines)


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + ("." if dot else "")


def _loaded_groups(given: str | list[Any]) -> list[str]:
    """The groups of every ``load_tools`` call in the input, first call first."""
    if isinstance(given, str):
        return []
    loaded: list[str] = []
    for item in given:
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        if item.get("name") != LOAD_TOOLS:
            continue
        for group in _group_names(item.get("arguments")):
            if group not in loaded:
                loaded.append(group)
    return loaded


def _group_names(arguments: Any) -> list[str]:
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return []
    groups = value.get("groups") if isinstance(value, dict) else None
    if isinstance(groups, str):
        groups = groups.replace(",", " ").split()
    return [str(g).strip() for g in groups or [] if str(g).strip()]


def load_tools_tool(view: ToolView) -> FunctionTool:
    """``load_tools(groups)``: the named groups' tools come with the next step."""

    def load_tools(groups: list[str]) -> str:
        """Load tool groups (listed in your instructions) so you can call their tools.

        Args:
            groups: The names of the groups whose tools the task needs, as listed.
        """
        return view.describe(groups)

    tool = function_tool(load_tools, failure_error_function=tool_error_message)
    return side_effects(tool, False)


class OnDemandModel(Model):
    """A model that is sent only the tools ``view`` shows for each request."""

    def __init__(self, model: Model, view: ToolView) -> None:
        self.model = model
        self.view = view

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: list[Tool],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        shown = self.view.visible(tools, input)
        return await self.model.get_response(
            system_instructions, input, model_settings, shown, *args, **kwargs
        )

    def stream_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: list[Tool],
        *args: Any,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        shown = self.view.visible(tools, input)
        return self.model.stream_response(
            system_instructions, input, model_settings, shown, *args, **kwargs
        )

    async def close(self) -> None:
        await self.model.close()
