"""MCP servers from ``settings.mcp.servers``, attached to the orchestrator.

Each enabled entry becomes an ``McpLink`` (``mcp_link.py``): a stable
``MCPServer`` in front of the SDK's ``MCPServerStdio`` (``command``) or
``MCPServerStreamableHttp`` (``url``), which connects in its own supervisor
task and reconnects with backoff when the server drops. ``allowed_tools``
becomes the SDK's static tool filter. A server that fails to connect at start
is left out and its one-line reason kept for ``/status`` and ``doctor`` — it
never stops the kernel.
"""

from __future__ import annotations

import asyncio
import logging

from agents.mcp import MCPServer

from core.agents.mcp_link import McpLink, McpServerState, McpServerStatus, build_server
from core.config import McpSettings

__all__ = ["McpServerState", "McpServerStatus", "McpServers", "build_server"]

log = logging.getLogger("core.mcp")


class McpServers:
    """The configured servers of one kernel: ``connect()`` at start, ``cleanup()`` at stop."""

    def __init__(self, settings: McpSettings) -> None:
        self._links: dict[str, McpLink] = {}
        self._disabled: dict[str, McpServerStatus] = {}
        for name, config in settings.servers.items():
            if config.enabled:
                self._links[name] = McpLink(name, config, settings)
            else:
                self._disabled[name] = McpServerStatus(name, "disabled", "enabled: false")
        self._active: list[MCPServer] = []

    @property
    def active(self) -> list[MCPServer]:
        """Servers that connected at start, for ``Orchestrator(mcp_servers=...)``.

        A server that drops later stays attached: its tools fail fast with a
        clear message while it reconnects, and work again once it is back.
        """
        return list(self._active)

    def statuses(self) -> list[McpServerStatus]:
        """One status per configured server, sorted by name."""
        found = {name: link.status() for name, link in self._links.items()} | self._disabled
        return [found[name] for name in sorted(found)]

    async def connect(self) -> None:
        """Connect every enabled server (in parallel); record each outcome. Never raises."""
        if not self._links:
            return
        results = await asyncio.gather(
            *(link.connect() for link in self._links.values()), return_exceptions=True
        )
        for name, result in zip(self._links, results, strict=True):
            if isinstance(result, BaseException):
                log.error("connecting MCP server %s failed: %s", name, result)
        self._active = [link for link in self._links.values() if link.status().state == "connected"]

    async def cleanup(self) -> None:
        """Close every connection (stdio servers are stopped). Never raises."""
        self._active = []
        results = await asyncio.gather(
            *(link.cleanup() for link in self._links.values()), return_exceptions=True
        )
        for name, result in zip(self._links, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("cleaning up MCP server %s failed: %s", name, result)
