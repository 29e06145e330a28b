"""Hearth as an MCP server (``main.py mcp``): a front of the running kernel that
speaks MCP over stdio (docs/mcp-server.md, ADR 0059)."""

from core.mcp_server.link import KernelLink, KernelUnavailableError
from core.mcp_server.listing import ToolListing
from core.mcp_server.server import JournalRequests, serve_stdio

__all__ = ["JournalRequests", "KernelLink", "KernelUnavailableError", "ToolListing", "serve_stdio"]
