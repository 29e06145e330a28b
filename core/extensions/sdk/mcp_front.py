"""Hearth as an MCP server, defined once for both of its fronts (ADR 0059).

``main.py mcp`` (stdio, in ``core.mcp_server``) and the HTTP API's ``/mcp``
(an extension, which may import only the contract and this library) serve the
same server: the person's own tools as their extensions declare them, each
annotated from the ``effect`` its manifest declares (``hints``: MCP's
``readOnlyHint`` only for ``read_only``, ``destructiveHint`` unless it is
``read_only`` or ``additive``; ADR 0074), plus ``ask`` — one turn of the
orchestrator, answered as on a channel — and the resources
``hearth://memories`` and ``hearth://reminders``. A front only says how it
reaches the kernel (``McpRequests``). Imports the ``mcp`` package: not
re-exported by ``core.extensions.sdk``, so extensions that do not serve MCP
never load it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Protocol

from mcp import types
from mcp.server.lowlevel import Server
from pydantic import AnyUrl

from core.extensions.contract import McpAnswer, McpOp

__all__ = ["ASK_TOOL", "RESOURCES", "McpRequests", "build_mcp_server", "hints"]

log = logging.getLogger(__name__)

ASK_TOOL = types.Tool(
    name="ask",
    description=(
        "Ask Hearth, the user's personal assistant, as in a chat: one turn of its "
        "orchestrator with all its tools. It may answer with a question (e.g. to allow "
        'an action); answer it with another ask ("yes", "always", "no").'
    ),
    inputSchema={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The message to Hearth."}},
        "required": ["text"],
        "additionalProperties": False,
    },
    # the turn asks the user itself before anything with side effects
    annotations=types.ToolAnnotations(readOnlyHint=False, destructiveHint=False),
)
# uri -> (the kernel's resource name, title, description)
RESOURCES = {
    "hearth://memories": ("memories", "Memories", "What Hearth remembers about you."),
    "hearth://reminders": ("reminders", "Reminders", "Your reminders and recurring tasks."),
}


class McpRequests(Protocol):
    """How a front reaches the kernel's MCP desk. A failure to reach it is an
    answer with ``error`` set, never an exception."""

    async def request(self, op: McpOp, name: str | None = None, arguments: str = "") -> McpAnswer:
        """``list`` (the tools), ``call`` (tool ``name`` with JSON ``arguments``) or
        ``resource`` (``name``)."""
        ...

    async def ask(self, text: str) -> McpAnswer:
        """One chat message; the answer is what the conversation hears next."""
        ...


def build_mcp_server(requests: McpRequests) -> Server[Any, Any]:
    """The MCP server whose every request goes to the kernel through ``requests``.

    The handlers are registered by request type rather than with ``Server``'s
    decorators: those are untyped, and the one for tool calls would validate the
    arguments against a listing it caches for every client alike, while what a
    person may call, and with what, is the kernel's to say."""

    async def list_tools(request: types.ListToolsRequest) -> types.ServerResult:
        answer = await requests.request("list")
        if answer.error is not None:  # ``ask`` is still listed, and says why it fails
            log.warning("%s", answer.error)
        return types.ServerResult(
            types.ListToolsResult(tools=[*map(_tool, answer.tools), ASK_TOOL])
        )

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        name, arguments = request.params.name, dict(request.params.arguments or {})
        if name == ASK_TOOL.name:
            text = str(arguments.get("text", ""))
            if not text.strip():
                return _text("ask needs a non-empty `text`", error=True)
            return _answered(await requests.ask(text))
        return _answered(await requests.request("call", name, json.dumps(arguments)))

    async def list_resources(request: types.ListResourcesRequest) -> types.ServerResult:
        resources = [
            types.Resource(
                uri=AnyUrl(uri), name=name, title=title, description=about, mimeType="text/plain"
            )
            for uri, (name, title, about) in RESOURCES.items()
        ]
        return types.ServerResult(types.ListResourcesResult(resources=resources))

    async def read_resource(request: types.ReadResourceRequest) -> types.ServerResult:
        uri = str(request.params.uri)
        if uri not in RESOURCES:
            raise ValueError(f"no resource {uri}; there are {', '.join(RESOURCES)}")
        answer = await requests.request("resource", RESOURCES[uri][0])
        if answer.error is not None:
            raise ValueError(answer.error)
        contents = types.TextResourceContents(
            uri=request.params.uri, mimeType="text/plain", text=answer.text
        )
        return types.ServerResult(types.ReadResourceResult(contents=[contents]))

    server: Server[Any, Any] = Server(
        "hearth",
        instructions="Hearth, the user's personal assistant: their memories, reminders and "
        "key-value store, and `ask` for anything else.",
    )
    server.request_handlers.update(
        {
            types.ListToolsRequest: list_tools,
            types.CallToolRequest: call_tool,
            types.ListResourcesRequest: list_resources,
            types.ReadResourceRequest: read_resource,
        }
    )
    return server


def hints(effect: str | None) -> types.ToolAnnotations:
    """MCP's annotations for a tool's declared ``effect`` (``tools.<name>.effect``).

    A client may run a ``readOnlyHint`` tool without asking, so only a tool that
    changes nothing is read-only; ``destructiveHint`` (meaningful only when not
    read-only) is false only for a tool that adds and never removes or
    overwrites. Not declared: the specification's defaults, not read-only and
    destructive."""
    return types.ToolAnnotations(
        readOnlyHint=effect == "read_only",
        destructiveHint=effect not in ("read_only", "additive"),
    )


def _tool(row: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name=str(row["name"]),
        description=str(row["description"]),
        inputSchema=row["schema"],
        annotations=hints(row.get("effect")),
    )


def _text(text: str, *, error: bool = False) -> types.ServerResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    return types.ServerResult(types.CallToolResult(content=content, isError=error))


def _answered(answer: McpAnswer) -> types.ServerResult:
    if answer.error is not None:
        return _text(answer.error, error=True)
    return _text(answer.text)
