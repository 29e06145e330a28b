"""Whether a tool has side effects, and who said so (SPEC §9, docs/consent.md).

A side effect is an action outside Hearth's own data or one that cannot be
undone. Only two parties may say (ADR 0044): the person running Hearth
(settings) about any tool, and an extension about its own tools. Who
decides, first match wins:

1. settings ``policy.side_effects.<name>`` — the person running Hearth;
2. the manifest's ``tools.<name>.side_effects`` of the extension providing
   the tool (a manifest naming a tool its extension does not provide fails
   to load, and is ignored here all the same);
3. the tool's own ``side_effects`` attribute (``core.extensions.sdk.
   side_effects``; core tools set it too);
4. the providing manifest's ``side_effects`` default, for its tools and its agent;
5. for MCP tools, the server's annotations: ``readOnlyHint: true`` (and not
   ``destructiveHint: true``) means none;
6. otherwise the tool counts as side-effecting.

A tool's source is where it comes from — ``core``, the extension providing
it (the first provider of a name), ``mcp:<server>`` for an MCP server's tool
— and never what a declaration says. ``describe`` is the one function the
gate, the flow and ``/policy`` all use.

The table of providers is rebuilt when the wiring changes (the same signal
that rebuilds the orchestrator, which primes it: ``prime``), else on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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

    def __init__(
        self,
        sources: Callable[[], Iterable[DeclaredTools]],
        settings: Mapping[str, bool] | None = None,
    ) -> None:
        self._sources = sources
        self._settings = dict(settings or {})  # policy.side_effects: the person's word
        self._table: dict[str, _Entry] | None = None

    def invalidate(self) -> None:
        """The wiring changed: rebuild the table on next use."""
        self._table = None

    def prime(self) -> None:
        """Build the table now (with the orchestrator, on the wiring's change), so a
        tool call's question finds it built instead of reading every manifest."""
        self._entries()

    def info(self, tool: Tool | Any) -> ToolInfo:
        """What is known of a tool object the model may call (the gate's question)."""
        name = str(getattr(tool, "name", type(tool).__name__))
        server = _mcp_server(tool)
        annotations = getattr(tool, "mcp_annotations", None) if server is not None else None
        return self.describe(name, getattr(tool, SIDE_EFFECTS_ATTR, None), server, annotations)

    def info_by_name(self, name: str) -> ToolInfo:
        """What is known of a tool by its name alone (the SDK asked about a call whose
        tool object is out of reach): the settings' and manifests' word, else
        side-effecting."""
        return self.describe(name, None)

    def describe(
        self, name: str, own: Any, mcp_server: str | None = None, annotations: Any = None
    ) -> ToolInfo:
        """The one decision (module docstring): ``own`` is the tool's own attribute,
        ``mcp_server`` the MCP server it comes from (``None``: not an MCP tool)."""
        entry = None if mcp_server is not None else self._entries().get(name)
        source = f"mcp:{mcp_server}" if mcp_server is not None else (entry.source if entry else "")
        said = self._settings.get(name)
        if said is not None:
            return ToolInfo(name, source, said, f"settings policy.side_effects.{name}")
        if entry is not None and entry.declared is not None:
            return ToolInfo(name, source, entry.declared, f"{entry.manifest} tools.{name}")
        if isinstance(own, bool):
            return ToolInfo(name, source, own, "declared by the tool")
        if entry is not None and entry.default is not None:
            return ToolInfo(name, source, entry.default, f"{entry.manifest} side_effects")
        if mcp_server is not None:
            effects, why = mcp_side_effects(annotations)
            return ToolInfo(name, source, effects, why)
        return ToolInfo(name, source, True, "not declared")

    def _entries(self) -> dict[str, _Entry]:
        if self._table is None:
            table: dict[str, _Entry] = {}
            for group in self._sources():
                for name in group.provides:  # a declaration never adds a name
                    if name not in table:  # the first provider of a name keeps it
                        entry = _Entry(
                            group.source, group.declared.get(name), group.default, group.manifest
                        )
                        table[name] = entry
            self._table = table
        return self._table


def _mcp_server(tool: Any) -> str | None:
    """The MCP server a tool comes from (``None``: not an MCP tool)."""
    if not isinstance(tool, FunctionTool):
        return None
    origin = get_function_tool_origin(tool)
    if origin is not None and origin.type == ToolOriginType.MCP:
        return origin.mcp_server_name or "?"
    return None


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
