"""Hearth as an MCP server: the ``mcp`` package's low-level ``Server`` in front of
the running kernel (``KernelLink``), over stdio (``main.py mcp``).

Tools are the person's own, as the kernel lists them (memory, reminders, kv),
each annotated from its ``side_effects`` (``readOnlyHint`` when it has none,
``destructiveHint`` when it has), plus ``ask``: one turn of the orchestrator,
answered as on a channel. Resources: ``hearth://memories`` and
``hearth://reminders``, the person's own.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from core.mcp_server.link import KernelLink, KernelUnavailableError

__all__ = ["ASK_TOOL", "RESOURCES", "build_server", "serve_stdio"]

ASK_TOOL = types.Tool(
    name="ask",
    description=(
        "Ask Hearth, the user's personal assistant, as in a chat: one turn of its "
        "orchestrator with all its tools. It may answer with a question (e.g. to allow "
        'an action); answer it with another ask ("yes", "always", "no").'
    ),
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The message to Hearth."}},
        "required": ["text"],
        "additionalProperties": False,
    },
    # the turn asks the user itself before anything with side effects
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
)
RESOURCES = {
    "hearth://memories": ("memories", "Memories", "What Hearth remembers about you."),
    "hearth://reminders": ("reminders", "Reminders", "Your reminders and recurring tasks."),
}


def _tool(row: dict[str, Any]) -> types.Tool:
    side_effects = bool(row["side_effects"])
    return types.Tool(
        name=row["name"],
        description=row["description"],
        input_schema=row["schema"],
        annotations=types.ToolAnnotations(
            read_only_hint=not side_effects, destructive_hint=side_effects
        ),
    )


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def build_server(link: KernelLink) -> Server[Any]:
    """The MCP server whose every request goes to the kernel over ``link``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        try:
            response = await link.request("list")
        except KernelUnavailableError as exc:  # ``ask`` is listed, and says why it fails
            logging.getLogger("core.mcp_server").warning("%s", exc)
            return types.ListToolsResult(tools=[ASK_TOOL])
        rows = json.loads(response.tools or "[]")
        return types.ListToolsResult(tools=[*map(_tool, rows), ASK_TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            if params.name == ASK_TOOL.name:
                response = await link.request("ask", arguments=str(arguments.get("text", "")))
            else:
                response = await link.request("call", params.name, json.dumps(arguments))
        except KernelUnavailableError as exc:
            return _text(str(exc), error=True)
        if response.error is not None:
            return _text(response.error, error=True)
        return _text(response.text)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=uri, name=name, title=title, description=about, mime_type="text/plain"
                )
                for uri, (name, title, about) in RESOURCES.items()
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri not in RESOURCES:
            raise ValueError(f"no resource {uri}; there are {', '.join(RESOURCES)}")
        try:
            response = await link.request("resource", RESOURCES[uri][0])
        except KernelUnavailableError as exc:
            raise ValueError(str(exc)) from exc
        if response.error is not None:
            raise ValueError(response.error)
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=response.text)
        return types.ReadResourceResult(contents=[contents])

    return Server(
        "hearth",
        instructions="Hearth, the user's personal assistant: their memories, reminders and "
        "key-value store, and `ask` for anything else.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(link: KernelLink) -> None:
    """Serve one client over stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(link)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await link.close()
