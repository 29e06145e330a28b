"""Hearth as an MCP server over stdio (``main.py mcp``): the server every front
shares (``core.extensions.sdk.mcp_front``) in front of the running kernel,
reached through the journal (``KernelLink``). The tools are listed from the
extensions on disk (``ToolListing``), so a client sees them with no kernel
running; each call then says that none runs and how to start it.
"""

from __future__ import annotations

import json

from core.extensions.contract import McpAnswer, McpOp
from core.extensions.sdk.mcp_front import build_mcp_server
from core.mcp_server.link import KernelLink, KernelUnavailableError
from core.mcp_server.listing import ToolListing

__all__ = ["JournalRequests", "serve_stdio"]


class JournalRequests:
    """The kernel's MCP desk through the journal; a kernel that does not answer
    is an answer naming why. ``list`` is the extensions' declarations (``listing``)."""

    def __init__(self, link: KernelLink, listing: ToolListing) -> None:
        self._link = link
        self._listing = listing

    async def request(self, op: McpOp, name: str | None = None, arguments: str = "") -> McpAnswer:
        if op == "list":
            return McpAnswer(tools=await self._listing.rows())
        return await self._answer(op, name, arguments or None)

    async def ask(self, text: str) -> McpAnswer:
        return await self._answer("ask", None, text)

    async def _answer(self, op: str, name: str | None, arguments: str | None) -> McpAnswer:
        try:
            response = await self._link.request(op, name, arguments)
        except KernelUnavailableError as exc:
            return McpAnswer(error=str(exc))
        tools = tuple(json.loads(response.tools or "[]"))
        return McpAnswer(response.text, response.error, tools)


async def serve_stdio(link: KernelLink, listing: ToolListing) -> None:
    """Serve one client over stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(JournalRequests(link, listing))
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await link.close()
