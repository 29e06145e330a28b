"""The consent parts of one kernel, built together (ADR 0021).

``KernelConsent`` builds the store (``sessions.db``), the desk, the policy,
the side-effect catalog and the gate, and makes the gate the tool hooks'
``admission``, so every tool call of every agent passes it. ``wrapper`` is
the orchestrator's tool wrapper (hooks + ``needs_approval``).
``declared_tools`` reads what the wired extensions' manifests say about their
tools, warning about a ``tools.<name>`` that names no tool of the extension.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agents import Tool
from agents.mcp import MCPServer

from core.agents import sanitize_tool_name, tool_name_of
from core.extensions.capabilities import Capability
from core.extensions.contract import Command
from core.extensions.manifest import MANIFEST_FILE
from core.extensions.records import ExtensionRecord
from core.kernel.consent.catalog import CORE_SOURCE, DeclaredTools, ToolCatalog, mcp_side_effects
from core.kernel.consent.commands import consent_commands, policy_summary
from core.kernel.consent.desk import ApprovalDesk
from core.kernel.consent.gate import ConsentGate, ConsentWrapper
from core.kernel.consent.policy import ConsentPolicy, ToolInfo
from core.kernel.consent.store import Approvals, ApprovalStore, SQLiteApprovals
from core.kernel.consent.store_pg import PostgresApprovals
from core.kernel.consent.ui import UiRequests
from core.kernel.hooks.frames import FrameSink
from core.kernel.people import Household
from core.kernel.shaping import TurnShaping
from core.settings import Settings

__all__ = ["KernelConsent", "declared_tools"]

log = logging.getLogger("core.kernel.consent")

MCP_LIST_TIMEOUT_S = 5.0


class KernelConsent:
    """Store, desk, policy, catalog and gate of one kernel."""

    def __init__(
        self,
        settings: Settings,
        db_path: Path,
        bus: FrameSink,
        shaping: TurnShaping,
        *,
        declared: Callable[[], Iterable[DeclaredTools]],
        channel_for: Callable[[str], Any | None],
        household: Household | None = None,
    ) -> None:
        frames, interceptor = shaping.hooks.frames, shaping.tools
        store: Approvals
        if settings.storage.backend == "postgres":  # ADR 0035
            store = PostgresApprovals(settings.storage)
        else:
            store = SQLiteApprovals(ApprovalStore(db_path, synchronous=settings.events.synchronous))
        self.desk = ApprovalDesk(
            store,
            bus,
            frames,
            channel_for,
            timeout_s=settings.policy.approval_timeout_s,
            household=household,
        )
        self.policy = ConsentPolicy(settings.policy, self.desk)
        self.catalog = ToolCatalog(declared)
        self.gate = ConsentGate(self.policy, self.catalog, interceptor, frames)
        interceptor.admission = self.gate
        self.wrapper = ConsentWrapper(interceptor, self.gate)
        self.ui = UiRequests(channel_for, frames, self.desk.holds)

    async def start(self) -> None:
        """Read the open paused turns, then time out, resume or ask again (before the
        bus dispatches: channels are started; what is published waits for it)."""
        await self.desk.open()
        await self.desk.start()

    async def stop(self) -> None:
        await self.desk.stop()

    async def aclose(self) -> None:
        await self.desk.aclose()

    def commands(
        self, tools: Callable[[], Sequence[Tool]], mcp_servers: Callable[[], Sequence[MCPServer]]
    ) -> list[Command]:
        """``/approve``, ``/deny``, ``/policy``: ``/policy`` lists ``tools`` (the
        orchestrator's) and the MCP servers' tools."""

        async def list_tools() -> list[ToolInfo]:
            infos = [self.catalog.info(tool) for tool in tools()]
            for server in mcp_servers():
                infos.extend(await _mcp_infos(server))
            return infos

        return consent_commands(self.desk, self.policy, list_tools, self.ui)

    def summary(self) -> str:
        return policy_summary(self.policy, self.desk)


async def _mcp_infos(server: MCPServer) -> list[ToolInfo]:
    try:
        async with asyncio.timeout(MCP_LIST_TIMEOUT_S):
            listed = await server.list_tools()
    except Exception as exc:
        log.warning("MCP server %s: tools not listed for /policy: %s", server.name, exc)
        return []
    infos = []
    for tool in listed:
        effects, why = mcp_side_effects(tool.annotations)
        infos.append(ToolInfo(tool.name, f"mcp:{server.name}", effects, why))
    return infos


def declared_tools(
    records: Iterable[ExtensionRecord], core_tools: Sequence[Tool]
) -> list[DeclaredTools]:
    """Core tools, then each wired extension's tools and agent with its manifest's
    ``side_effects`` and ``tools`` (a name it does not provide is warned about)."""
    groups = [DeclaredTools(CORE_SOURCE, [tool_name_of(t) for t in core_tools], {})]
    for record in records:
        manifest = record.manifest
        if manifest is None:
            continue
        provides = [tool_name_of(t) for t in record.tools] if record.has(Capability.TOOL) else []
        if record.has(Capability.AGENT):
            try:
                agent = record.instance.get_agent_descriptor().name
                provides.append(sanitize_tool_name(agent, record.ext_id))
            except Exception as exc:  # reported where the agent is wrapped as a tool
                log.debug("agent descriptor of %s: %s", record.ext_id, exc)
        where = f"{record.ext_id}/{MANIFEST_FILE}"
        for name in manifest.tools:
            if name not in provides:
                log.warning(
                    "%s: tools.%s: %s provides no tool of that name (its tools: %s)",
                    where, name, record.ext_id, ", ".join(provides) or "none",
                )  # fmt: skip
        declared = {name: entry.side_effects for name, entry in manifest.tools.items()}
        groups.append(
            DeclaredTools(record.ext_id, provides, declared, manifest.side_effects, where)
        )
    return groups
