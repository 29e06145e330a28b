"""Hearth as an MCP server, defined once for both of its fronts (ADR 0059).

``main.py mcp`` (stdio, in ``core.mcp_server``) and the HTTP API's ``/mcp``
(an extension, which may import only the contract and this library) serve the
same server: the person's own tools as the kernel lists them, each annotated
from its ``side_effects`` (``readOnlyHint`` when it has none,
``destructiveHint`` when it has), plus ``ask`` — one turn of the
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

from core.extensions.contract import McpAnswer, McpOp

__all__ = ["ASK_TOOL", "RESOURCES", "McpRequests", "build_mcp_server"]

log = logging.getLogger(__name__)

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


def build_mcp_server(requests: McpRequests) -> Server[Any]:
    """The MCP server whose every request goes to the kernel through ``requests``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        answer = await requests.request("list")
        if answer.error is not None:  # ``ask`` is still listed, and says why it fails
            log.warning("%s", answer.error)
        return types.ListToolsResult(tools=[*map(_tool, answer.tools), ASK_TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == ASK_TOOL.name:
            text = str(arguments.get("text", ""))
            if not text.strip():
                return _text("ask needs a non-empty `text`", error=True)
            return _answered(await requests.ask(text))
        return _answered(await requests.request("call", params.name, json.dumps(arguments)))

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
        answer = await requests.request("resource", RESOURCES[uri][0])
        if answer.error is not None:
            raise ValueError(answer.error)
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=answer.text)
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


def _tool(row: dict[str, Any]) -> types.Tool:
    side_effects = bool(row["side_effects"])
    return types.Tool(
        name=str(row["name"]),
        description=str(row["description"]),
        input_schema=row["schema"],
        annotations=types.ToolAnnotations(
            read_only_hint=not side_effects, destructive_hint=side_effects
        ),
    )


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def _answered(answer: McpAnswer) -> types.CallToolResult:
    if answer.error is not None:
        return _text(answer.error, error=True)
    return _text(answer.text)
