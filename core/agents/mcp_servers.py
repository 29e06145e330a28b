"""MCP servers from ``settings.mcp.servers``, attached to the orchestrator.

Each entry becomes an SDK ``MCPServerStdio`` (``command``) or
``MCPServerStreamableHttp`` (``url``); ``allowed_tools`` becomes the SDK's
static tool filter. The SDK's ``MCPServerManager`` connects them in parallel,
each in its own worker task: the transports hold anyio task groups, which
must be entered and exited by the same task, and the kernel's start and stop
need not run in one task. A server that fails to connect is left out and its
one-line reason kept for ``/status`` and ``doctor`` — it never stops the kernel.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from agents.mcp import (
    MCPServer,
    MCPServerManager,
    MCPServerStdio,
    MCPServerStdioParams,
    MCPServerStreamableHttp,
    create_static_tool_filter,
)

from core.settings import McpServerSettings, McpSettings

__all__ = ["McpServerState", "McpServerStatus", "McpServers", "build_server"]

log = logging.getLogger("core.mcp")

McpServerState = Literal["connected", "failed", "disabled"]


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    """What ``/status`` and ``doctor`` say about one configured server."""

    name: str
    state: McpServerState
    detail: str
    tools: tuple[str, ...] = ()

    def line(self) -> str:
        return f"{self.name}: {self.state} — {self.detail}"


def build_server(name: str, config: McpServerSettings, *, call_timeout_s: float) -> MCPServer:
    """The SDK server object for one ``mcp.servers`` entry (not connected)."""
    tool_filter = create_static_tool_filter(allowed_tool_names=config.allowed_tools)
    if config.command is not None:
        params: MCPServerStdioParams = {"command": config.command, "args": list(config.args)}
        if config.env:  # merged over the SDK's safe default environment (PATH, HOME, ...)
            params["env"] = dict(config.env)
        return MCPServerStdio(
            params,
            name=name,
            client_session_timeout_seconds=call_timeout_s,
            tool_filter=tool_filter,
        )
    assert config.url is not None  # settings guarantee exactly one of command / url
    return MCPServerStreamableHttp(
        {"url": config.url, "headers": dict(config.headers), "timeout": call_timeout_s},
        name=name,
        client_session_timeout_seconds=call_timeout_s,
        tool_filter=tool_filter,
    )


class McpServers:
    """The configured servers of one kernel: ``connect()`` at start, ``cleanup()`` at stop."""

    def __init__(self, settings: McpSettings) -> None:
        self._settings = settings
        self._servers: dict[str, MCPServer] = {}
        self._statuses: dict[str, McpServerStatus] = {}
        for name, config in settings.servers.items():
            if not config.enabled:
                self._statuses[name] = McpServerStatus(name, "disabled", "enabled: false")
                continue
            self._servers[name] = build_server(name, config, call_timeout_s=settings.call_timeout_s)
        self._manager = MCPServerManager(
            list(self._servers.values()),
            connect_timeout_seconds=settings.connect_timeout_s,
            cleanup_timeout_seconds=settings.connect_timeout_s,
            connect_in_parallel=True,
        )
        self._active: list[MCPServer] = []

    @property
    def active(self) -> list[MCPServer]:
        """Connected servers, for ``Orchestrator(mcp_servers=...)``."""
        return list(self._active)

    def statuses(self) -> list[McpServerStatus]:
        """One status per configured server, sorted by name."""
        return [self._statuses[name] for name in sorted(self._statuses)]

    async def connect(self) -> None:
        """Connect every enabled server; record each outcome. Never raises."""
        if not self._servers:
            return
        try:
            await self._manager.connect_all()
        except Exception as exc:  # the manager records per-server errors; this is a backstop
            log.error("connecting MCP servers failed: %s", _reason(exc))
        errors = self._manager.errors
        connected = set(self._manager.active_servers)
        for name, server in self._servers.items():
            if server in connected:
                await self._inspect(name, server)
                continue
            error = errors.get(server)
            reason = self._failure(name, error) if error else "did not connect"
            self._statuses[name] = McpServerStatus(name, "failed", reason)
            log.error("MCP server %s: %s", name, reason)

    async def cleanup(self) -> None:
        """Close every connection (stdio servers are stopped). Never raises."""
        self._active = []
        if not self._servers:
            return
        try:
            await self._manager.cleanup_all()
        except Exception as exc:
            log.warning("cleaning up MCP servers failed: %s", _reason(exc))

    async def _inspect(self, name: str, server: MCPServer) -> None:
        """List the (filtered) tools once: proves the server answers, and names them."""
        try:
            async with asyncio.timeout(self._settings.call_timeout_s):
                tools = tuple(t.name for t in await server.list_tools())
        except Exception as exc:
            reason = f"connected, but listing its tools failed: {_reason(exc)}"
            self._statuses[name] = McpServerStatus(name, "failed", reason)
            log.error("MCP server %s: %s", name, reason)
            return
        self._active.append(server)
        detail = f"{len(tools)} tool(s): {', '.join(tools) or 'none'}"
        allowed = self._settings.servers[name].allowed_tools
        missing = [t for t in allowed or [] if t not in tools]
        if missing:
            detail += f"; allowed_tools not offered by the server: {', '.join(missing)}"
        self._statuses[name] = McpServerStatus(name, "connected", detail, tools)
        log.info("MCP server %s connected: %s", name, detail)

    def _failure(self, name: str, error: BaseException) -> str:
        config = self._settings.servers[name]
        if isinstance(error, TimeoutError):
            return f"no answer within {self._settings.connect_timeout_s:g} s"
        target = f"command {config.command!r}" if config.command else f"url {_safe_url(config.url)}"
        return f"{target}: {_reason(error)}"


def _safe_url(url: str | None) -> str:
    """The URL without credentials or query (tokens often travel there)."""
    parts = urlsplit(url or "")
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _reason(exc: BaseException) -> str:
    """One line naming the innermost error (anyio wraps failures in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    text = f"{name}: {text}" if text else name
    return text if len(text) <= 300 else text[:299] + "…"
