"""One configured MCP server as the orchestrator sees it: a stable ``MCPServer``
in front of the SDK connection, which it supervises and reconnects.

The SDK's server objects connect once; a stdio server that dies (or an HTTP
server that goes away) stays dead. ``McpLink`` owns one supervisor task per
server. The task connects (the SDK transports hold anyio task groups, which
must be entered and exited by the same task, so connect and cleanup both run
there), pings the server every ``health_interval_s``, and when the server is
gone (a failed ping, or a call that fails while a ping fails too) cleans up and
reconnects with exponential backoff (``reconnect_initial_s`` doubling up to
``reconnect_max_s``), ``reconnect_max_attempts`` times, then reports ``failed``.
Each state change is logged once. While the server is not connected its tools
stay listed (the last known list) and calls fail at once with
``McpServerUnavailableError`` — a turn never waits on a dead server.
A server that fails its very first connect is ``failed`` at once (a
configuration error, reported by ``/status`` and ``doctor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from agents.mcp import (
    MCPServer,
    MCPServerStdio,
    MCPServerStdioParams,
    MCPServerStreamableHttp,
    create_static_tool_filter,
)
from httpx import codes
from mcp.shared.exceptions import McpError
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolResult,
    GetPromptResult,
    ListPromptsResult,
    Tool as MCPTool,
)

from core.agents.errors import McpServerUnavailableError
from core.config import McpServerSettings, McpSettings
from core.extensions.tool_failures import tool_error_message
from core.runtime.backoff import backoff_delay

__all__ = ["McpLink", "McpServerState", "McpServerStatus", "build_server"]

log = logging.getLogger("core.mcp")

McpServerState = Literal["connecting", "connected", "reconnecting", "failed", "disabled"]
_PING_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    """What ``/status`` and ``doctor`` say about one configured server."""

    name: str
    state: McpServerState
    detail: str
    tools: tuple[str, ...] = ()
    attempt: int = 0  # reconnecting: the number of the next attempt
    next_attempt_at: float | None = None  # reconnecting: when (time.monotonic())

    def describe(self) -> str:
        """The state in words: ``reconnecting (attempt 2, next in 4.0s)``."""
        if self.state != "reconnecting":
            return self.state
        wait = max(0.0, (self.next_attempt_at or 0.0) - time.monotonic())
        return f"reconnecting (attempt {self.attempt}, next in {wait:.1f}s)"

    def line(self) -> str:
        return f"{self.name}: {self.describe()} — {self.detail}"


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


class McpLink(MCPServer):
    """A supervised MCP server: ``connect()`` starts it, ``cleanup()`` stops it."""

    def __init__(self, name: str, config: McpServerSettings, settings: McpSettings) -> None:
        super().__init__(failure_error_function=tool_error_message)
        self._name = name
        self._config = config
        self._settings = settings
        self._server: MCPServer | None = None  # set while connected
        self._tools: list[MCPTool] = []  # the last list the server gave
        self._status = McpServerStatus(name, "connecting", "not connected yet")
        self._wake = asyncio.Event()  # the server was lost, or stop was asked
        self._stopping = False
        self._first_outcome = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self._name

    def status(self) -> McpServerStatus:
        return self._status

    # ------------------------------------------------------------ lifecycle

    async def connect(self) -> None:
        """Start supervising; return once the first connect succeeded or failed."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self._name}")
            self._task.add_done_callback(self._supervisor_ended)
        await self._first_outcome.wait()

    async def cleanup(self) -> None:
        """Stop supervising and close the connection (stdio servers are stopped)."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(self._settings.connect_timeout_s + _PING_TIMEOUT_S):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # ------------------------------------------------------------ MCPServer

    async def list_tools(self, run_context: Any = None, agent: Any = None) -> list[MCPTool]:
        """The server's tools; while it is not connected, the last known list."""
        server = self._server
        if server is None:
            return list(self._tools)
        try:
            async with asyncio.timeout(self._settings.connect_timeout_s):
                self._tools = list(await server.list_tools(run_context, agent))
        except Exception as exc:
            await self._check_after_failure(server, exc)
        return list(self._tools)

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        server = self._connected()
        try:
            if meta is None:
                return await server.call_tool(tool_name, arguments)
            return await server.call_tool(tool_name, arguments, meta=meta)
        except Exception as exc:
            if await self._check_after_failure(server, exc):
                raise  # the server is fine: the tool itself failed
            raise McpServerUnavailableError(self._name, self._status.describe()) from None

    async def list_prompts(self) -> ListPromptsResult:
        return await self._connected().list_prompts()

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> GetPromptResult:
        return await self._connected().get_prompt(name, arguments)

    # ------------------------------------------------------------ supervision

    def _connected(self) -> MCPServer:
        server = self._server
        if server is None:
            raise McpServerUnavailableError(self._name, self._status.describe())
        return server

    async def _check_after_failure(self, server: MCPServer, exc: BaseException) -> bool:
        """After a failed request: is the server still there? If not, reconnect it."""
        if server is self._server and await _answers_ping(server):
            return True
        self._lost(server, _reason(exc))
        return False

    def _lost(self, server: MCPServer, reason: str) -> None:
        if server is not self._server or self._stopping:
            return
        self._server = None
        self._set(self._reconnecting(f"connection lost: {reason}", 1, self._delay(1)))
        self._wake.set()

    async def _supervise(self) -> None:
        failures = 0
        ever_connected = False
        while not self._stopping:
            server = build_server(
                self._name, self._config, call_timeout_s=self._settings.call_timeout_s
            )
            try:
                tools = await self._open(server)
            except Exception as exc:
                await _close(server)
                reason = self._failure(exc)
                failures += 1
                if not ever_connected or failures >= self._settings.reconnect_max_attempts:
                    if ever_connected:
                        reason = f"gave up after {failures} reconnect attempt(s): {reason}"
                    self._set(McpServerStatus(self._name, "failed", reason))
                    return
                await self._back_off(failures + 1, f"reconnect failed: {reason}")
                continue
            ever_connected, failures = True, 0
            self._serve(server, tools)
            try:
                await self._watch(server)
            finally:
                self._server = None
                await _close(server)
            if not self._stopping:
                await self._back_off(1, self._status.detail)

    async def _open(self, server: MCPServer) -> list[MCPTool]:
        async with asyncio.timeout(self._settings.connect_timeout_s):
            await server.connect()  # type: ignore[no-untyped-call]
            return list(await server.list_tools())

    def _serve(self, server: MCPServer, tools: list[MCPTool]) -> None:
        self._tools = tools
        self._server = server
        names = tuple(t.name for t in tools)
        detail = f"{len(names)} tool(s): {', '.join(names) or 'none'}"
        missing = [t for t in self._config.allowed_tools or [] if t not in names]
        if missing:
            detail += f"; allowed_tools not offered by the server: {', '.join(missing)}"
        self._set(McpServerStatus(self._name, "connected", detail, names))

    async def _watch(self, server: MCPServer) -> None:
        """Return when the server is lost or stop is asked; ping it meanwhile."""
        while not self._stopping and server is self._server:
            try:
                async with asyncio.timeout(self._settings.health_interval_s):
                    await self._wake.wait()
            except TimeoutError:
                if not await _answers_ping(server):
                    self._lost(server, "it did not answer a ping")
        self._wake.clear()

    async def _back_off(self, attempt: int, detail: str) -> None:
        """Show ``reconnecting (attempt N, next in Xs)`` and wait (a stop cuts it short)."""
        delay = self._delay(attempt)
        self._set(self._reconnecting(detail, attempt, delay))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()
        self._wake.clear()

    def _delay(self, attempt: int) -> float:
        settings = self._settings
        return backoff_delay(attempt, settings.reconnect_initial_s, settings.reconnect_max_s)

    def _reconnecting(self, detail: str, attempt: int, delay: float) -> McpServerStatus:
        at = time.monotonic() + delay
        return McpServerStatus(self._name, "reconnecting", detail, (), attempt, at)

    def _set(self, status: McpServerStatus) -> None:
        previous, self._status = self._status, status
        if status.state != "connecting":
            self._first_outcome.set()
        if previous.state == status.state:
            log.debug("MCP server %s", status.line())
        elif status.state == "connected":
            log.info("MCP server %s connected: %s", self._name, status.detail)
        elif status.state == "reconnecting":
            log.warning("MCP server %s", status.line())
        else:
            log.error("MCP server %s", status.line())

    def _supervisor_ended(self, task: asyncio.Task[None]) -> None:
        self._first_outcome.set()
        if not task.cancelled() and task.exception() is not None:
            reason = f"supervision crashed: {_reason(task.exception() or Exception())}"
            self._server = None
            self._set(McpServerStatus(self._name, "failed", reason))

    def _failure(self, error: BaseException) -> str:
        if isinstance(error, TimeoutError):
            return f"no answer within {self._settings.connect_timeout_s:g} s"
        config = self._config
        target = f"command {config.command!r}" if config.command else f"url {_safe_url(config.url)}"
        return f"{target}: {_reason(error)}"


async def _answers_ping(server: MCPServer) -> bool:
    """Does the server answer at all? An error reply counts (some servers do not
    implement ``ping``); a closed connection, a timeout or a transport error does not."""
    session = getattr(server, "session", None)
    if session is None:
        return False
    try:
        async with asyncio.timeout(_PING_TIMEOUT_S):
            await session.send_ping()
    except McpError as exc:  # ``mcp`` reports a timeout with HTTP's code
        return exc.error.code not in (CONNECTION_CLOSED, codes.REQUEST_TIMEOUT)
    except Exception:
        return False
    return True


async def _close(server: MCPServer) -> None:
    try:
        await server.cleanup()  # type: ignore[no-untyped-call]
    except Exception as exc:
        log.debug("closing MCP server %s: %s", server.name, _reason(exc))


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
