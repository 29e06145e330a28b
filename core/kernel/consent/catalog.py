"""Whether a tool has side effects, and who said so (SPEC §9, docs/consent.md).

A side effect is an action outside Hearth's own data or one that cannot be
undone. Who decides, first match wins:

1. the manifest's ``tools.<name>.side_effects`` of the extension providing
   (or declaring) the tool — the deployer can always correct a tool;
2. the tool's own ``side_effects`` attribute (``core.extensions.sdk.
   side_effects``; core tools set it too);
3. the manifest's ``side_effects`` default, for its tools and its agent;
4. for MCP tools, the server's annotations: ``readOnlyHint: true`` (and not
   ``destructiveHint: true``) means none;
5. otherwise the tool counts as side-effecting.

The table of declared names is rebuilt lazily when the wiring changes (the
same signal that rebuilds the orchestrator).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool, Tool
from agents.tool import ToolOriginType, get_function_tool_origin

from core.extensions.sdk import SIDE_EFFECTS_ATTR
from core.kernel.consent.policy import ToolInfo

__all__ = ["CORE_SOURCE", "DeclaredTools", "ToolCatalog", "mcp_side_effects"]

CORE_SOURCE = "core"


@dataclass(frozen=True, slots=True)
class DeclaredTools:
    """One source's tools as consent sees them: the names it provides, the
    manifest's per-tool declarations and its default (``None``: not said)."""

    source: str
    provides: Sequence[str]
    declared: dict[str, bool]
    default: bool | None = None
    manifest: str = ""  # "<ext id>/manifest.yaml", for the reasons shown by /policy


@dataclass(frozen=True, slots=True)
class _Entry:
    source: str
    declared: bool | None
    default: bool | None
    manifest: str


class ToolCatalog:
    """``info(tool)``: name, source and side effects of any tool the model may call."""

    def __init__(self, sources: Callable[[], Iterable[DeclaredTools]]) -> None:
        self._sources = sources
        self._table: dict[str, _Entry] | None = None

    def invalidate(self) -> None:
        """The wiring changed: rebuild the table on next use."""
        self._table = None

    def info(self, tool: Tool | Any) -> ToolInfo:
        name = str(getattr(tool, "name", type(tool).__name__))
        entry = self._entries().get(name)
        if entry is not None and entry.declared is not None:
            why = f"{entry.manifest} tools.{name}"
            return ToolInfo(name, entry.source, entry.declared, why)
        source = entry.source if entry is not None else _mcp_source(tool)
        own = getattr(tool, SIDE_EFFECTS_ATTR, None)
        if isinstance(own, bool):
            return ToolInfo(name, source, own, "declared by the tool")
        if entry is not None and entry.default is not None:
            return ToolInfo(name, source, entry.default, f"{entry.manifest} side_effects")
        if source.startswith("mcp:") and isinstance(tool, FunctionTool):
            effects, why = mcp_side_effects(tool.mcp_annotations)
            return ToolInfo(name, source, effects, why)
        return ToolInfo(name, source, True, "not declared")

    def info_by_name(self, name: str) -> ToolInfo:
        """What is known of a tool by its name alone (the SDK asked about a call whose
        tool object is out of reach): the manifests' word, else side-effecting."""
        entry = self._entries().get(name)
        if entry is None:
            return ToolInfo(name, "", True, "not declared")
        effects = entry.declared if entry.declared is not None else entry.default
        return ToolInfo(name, entry.source, True if effects is None else effects, entry.manifest)

    def _entries(self) -> dict[str, _Entry]:
        if self._table is None:
            table: dict[str, _Entry] = {}
            for group in self._sources():
                for name in [*group.provides, *group.declared]:
                    if name not in table:  # the first provider of a name keeps it
                        entry = _Entry(
                            group.source, group.declared.get(name), group.default, group.manifest
                        )
                        table[name] = entry
            self._table = table
        return self._table


def _mcp_source(tool: Any) -> str:
    if not isinstance(tool, FunctionTool):
        return ""
    origin = get_function_tool_origin(tool)
    if origin is not None and origin.type == ToolOriginType.MCP:
        return f"mcp:{origin.mcp_server_name or '?'}"
    return ""


def mcp_side_effects(annotations: Any) -> tuple[bool, str]:
    """An MCP tool's side effects from its annotations (MCP spec defaults:
    ``readOnlyHint`` false, ``destructiveHint`` true): only a read-only tool has none."""
    if annotations is None:
        return True, "MCP tool without annotations"
    read_only = _hint(annotations, "readOnlyHint", "read_only_hint")
    destructive = _hint(annotations, "destructiveHint", "destructive_hint")
    if read_only is True and destructive is not True:
        return False, "MCP readOnlyHint"
    if destructive is False:
        return True, "MCP: writes (destructiveHint false, not readOnlyHint)"
    return True, "MCP: not readOnlyHint"


def _hint(annotations: Any, *names: str) -> Any:
    """One annotation by its wire name or the ``mcp`` package's attribute name
    (they differ between versions), from an object or a dict."""
    for name in names:
        value = (
            annotations.get(name)
            if isinstance(annotations, dict)
            else getattr(annotations, name, None)
        )
        if value is not None:
            return value
    return None
