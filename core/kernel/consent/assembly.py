"""The consent parts of one kernel, built together (ADR 0021).

``KernelConsent`` builds the store (``sessions.db``), the desk, the policy,
the side-effect catalog and the gate. It is built before the turn's shaping,
which hands the gate to the tool hooks as their ``admission`` (so every tool
call of every agent passes it); the tool pipeline adds its ``needs_approval``
to the orchestrator's tools when the policy can ask (``tool_pipeline.py``,
ADR 0079).
``declared_tools`` reads what the wired extensions' manifests say about their
own tools (a ``tools.<name>`` naming another's tool is a load error, ADR 0044).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agents import Tool
from agents.mcp import MCPServer

from core.agents import tool_name_of
from core.config import Settings
from core.extensions.contract import Command
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.declarations import provided_tool_names
from core.extensions.loading.manifest import MANIFEST_FILE
from core.extensions.loading.records import ExtensionRecord
from core.kernel.consent.catalog import CORE_SOURCE, DeclaredTools, ToolCatalog
from core.kernel.consent.commands import consent_commands, policy_summary
from core.kernel.consent.desk import ApprovalDesk
from core.kernel.consent.elsewhere import QuestionsElsewhere
from core.kernel.consent.gate import ConsentGate
from core.kernel.consent.policy import ConsentPolicy, ToolInfo
from core.kernel.consent.store import ApprovalStore
from core.kernel.consent.ui import UiRequests
from core.kernel.conversations.people import Household
from core.kernel.conversations.session_schema import sessions_database
from core.kernel.hooks.frames import FrameRecorder, FrameSink

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
        *,
        declared: Callable[[], Iterable[DeclaredTools]],
        channel_for: Callable[[str], Any | None],
        household: Household | None = None,
    ) -> None:
        frames = FrameRecorder(bus)
        store = ApprovalStore(
            sessions_database(
                db_path,
                settings.storage,
                synchronous=settings.events.synchronous,
                what="the approvals are",
            )
        )
        self.desk = ApprovalDesk(
            store,
            bus,
            frames,
            channel_for,
            timeout_s=settings.policy.approval_timeout_s,
            household=household,
        )
        self.policy = ConsentPolicy(settings.policy, self.desk)
        self.catalog = ToolCatalog(declared, settings.policy.side_effects)
        self.gate = ConsentGate(self.policy, self.catalog, frames)
        # a worker of a channels/workers split asks through the database (ADR 0091)
        self.elsewhere = (
            QuestionsElsewhere.on(settings.storage, bus)
            if settings.storage.backend == "postgres" and settings.kernel.role == "workers"
            else None
        )
        self.ui = UiRequests(channel_for, frames, self.desk.holds, self.elsewhere)

    async def start(self) -> None:
        """Read the open paused turns, then time out, resume or ask again (before the
        bus dispatches: channels are started; what is published waits for it)."""
        await self.desk.open()
        await self.desk.start()

    async def stop(self) -> None:
        await self.desk.stop()

    async def aclose(self) -> None:
        await self.desk.aclose()
        if self.elsewhere is not None:
            await self.elsewhere.aclose()

    def commands(
        self, tools: Callable[[], Sequence[Tool]], mcp_servers: Callable[[], Sequence[MCPServer]]
    ) -> list[Command]:
        """``/approve``, ``/deny``, ``/policy``: ``/policy`` lists ``tools`` (the
        orchestrator's) and the MCP servers' tools."""

        async def list_tools() -> list[ToolInfo]:
            infos = [self.catalog.info(tool) for tool in tools()]
            for server in mcp_servers():
                infos.extend(await _mcp_infos(self.catalog, server))
            return infos

        return consent_commands(self.desk, self.policy, list_tools, self.ui)

    def summary(self) -> str:
        return policy_summary(self.policy, self.desk)


async def _mcp_infos(catalog: ToolCatalog, server: MCPServer) -> list[ToolInfo]:
    """An MCP server's tools as the gate sees them (``ToolCatalog.describe``)."""
    try:
        async with asyncio.timeout(MCP_LIST_TIMEOUT_S):
            listed = await server.list_tools()
    except Exception as exc:
        log.warning("MCP server %s: tools not listed for /policy: %s", server.name, exc)
        return []
    return [catalog.describe(tool.name, None, server.name, tool.annotations) for tool in listed]


def declared_tools(
    records: Iterable[ExtensionRecord], core_tools: Sequence[Tool]
) -> list[DeclaredTools]:
    """Core tools, then each wired extension's tools and agent with its manifest's
    ``side_effects`` and ``tools`` (only for names it provides)."""
    groups = [DeclaredTools(CORE_SOURCE, [tool_name_of(t) for t in core_tools], {})]
    for record in records:
        manifest = record.manifest
        if manifest is None:
            continue
        tools = record.tools if record.has(Capability.TOOL) else []
        try:
            provides = provided_tool_names(
                record.ext_id, record.instance, record.capabilities, tools
            )
        except Exception as exc:  # the agent's descriptor: reported where it is wrapped as a tool
            log.debug("agent descriptor of %s: %s", record.ext_id, exc)
            provides = [tool_name_of(t) for t in tools]
        declared = {
            n: e.side_effects
            for n, e in manifest.tools.items()
            if n in provides and e.side_effects is not None
        }
        where = f"{record.ext_id}/{MANIFEST_FILE}"
        groups.append(
            DeclaredTools(record.ext_id, provides, declared, manifest.side_effects, where)
        )
    return groups
