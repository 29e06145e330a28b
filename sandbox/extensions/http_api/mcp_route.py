"""``/mcp``: Hearth as an MCP server over the streamable HTTP transport (ADR 0059).

The ``mcp`` package's low-level ``Server`` behind the API token. Its client is
the token's holder, the person whose identity is ``http:default`` (settings
``people:``), exactly as for the API's chat requests: the tools are that
person's own, listed and called through ``context.mcp_request`` (the kernel's
MCP desk, as ``main.py mcp`` reaches it through the journal), and ``ask`` is
one ordinary chat message of conversation ``mcp`` on this channel — so a
side-effecting call in that turn asks on this channel and the person's next
``ask`` ("yes", "always", "no") answers it, as over stdio (ADR 0059).

The session manager needs a task group that outlives requests; uvicorn runs
without a lifespan here, so the first request starts it and ``close`` (the
channel's ``stop``) ends it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from core.extensions.contract import ExtensionContext, McpAnswer

from .auth import TokenCheck
from .config import ApiConfig
from .notifications import Notifications
from .openai_shape import ApiError, Ask
from .replies import PendingReply, ReplyGoneError

MCP_PATH = "/mcp"
MCP_CONVERSATION = "mcp"  # the conversation of ``ask``, and where a member's reminders land
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
    annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
)
RESOURCES = {
    "hearth://memories": ("memories", "Memories", "What Hearth remembers about you."),
    "hearth://reminders": ("reminders", "Reminders", "Your reminders and recurring tasks."),
}


class McpBackend(Protocol):
    """What ``/mcp`` needs from the channel."""

    config: ApiConfig
    tokens: TokenCheck
    notifications: Notifications | None

    @property
    def context(self) -> ExtensionContext: ...
    @property
    def ready(self) -> bool: ...
    async def submit(self, ask: Ask) -> PendingReply: ...
    def release(self, pending: PendingReply) -> None: ...


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: the token first, then the MCP session manager."""

    def __init__(self, backend: McpBackend) -> None:
        self._backend = backend
        self._server = build_server(backend, self.ask)
        self._manager: StreamableHTTPSessionManager | None = None
        self._task: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()

    @property
    def route(self) -> Route:
        return Route(MCP_PATH, self)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._backend.tokens.require(Request(scope, receive))
        if not self._backend.ready:
            raise ApiError(503, "Hearth is starting or stopping", headers={"Retry-After": "1"})
        manager = await self._running()
        await manager.handle_request(scope, receive, send)

    async def _running(self) -> StreamableHTTPSessionManager:
        async with self._starting:
            if self._manager is None or self._task is None or self._task.done():
                manager = StreamableHTTPSessionManager(self._server)
                started = asyncio.Event()
                self._task = asyncio.create_task(_run(manager, started), name="http_api mcp")
                await started.wait()
                self._manager = manager
            return self._manager

    async def ask(self, text: str) -> types.CallToolResult:
        """One chat message of conversation ``mcp``; the answer is its reply, or — when
        the turn paused to ask first, or the message answered such a question — what
        this channel sends the conversation next (the question, the resumed turn's
        reply), as ``main.py mcp``'s answers are (ADR 0059)."""
        if not text.strip():
            return _text("ask needs a non-empty `text`", error=True)
        notes = self._backend.notifications
        assert notes is not None, "initialize() was not called"
        seen = await self._newest_seen(notes)
        pending = await self._backend.submit(Ask(MCP_CONVERSATION, [("user", text)], text, None))
        timeout_s = self._backend.config.reply_timeout_s
        reply = asyncio.ensure_future(pending.result())
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    sent = asyncio.ensure_future(notes.wait_after(seen, MCP_CONVERSATION, 60))
                    waits = {sent} if reply.done() else {sent, reply}
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    found = sent.result() if sent.done() else []
                    sent.cancel()
                    seen = found[-1].id if found else seen
                    texts = [n.text for n in found if n.conversation == MCP_CONVERSATION]
                    if reply.done() and reply.result():
                        texts.append(reply.result())
                    if texts:
                        return _text("\n\n".join(texts))
        except TimeoutError:
            return _text(f"no reply within {timeout_s:g} s", error=True)
        except ReplyGoneError as exc:
            return _text(str(exc), error=True)
        finally:
            reply.cancel()
            self._backend.release(pending)

    async def _newest_seen(self, notes: Notifications) -> int:
        """The id of the newest notification now: older ones are no answer to an ask."""
        newest = 0
        while found := await notes.after(newest, None):
            newest = found[-1].id
        return newest

    async def close(self) -> None:
        """End every MCP session (the channel stops); a later request starts anew."""
        task, self._task, self._manager = self._task, None, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _run(manager: StreamableHTTPSessionManager, started: asyncio.Event) -> None:
    async with manager.run():
        started.set()
        await asyncio.Event().wait()  # until ``close`` cancels it


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


def build_server(
    backend: McpBackend, ask: Callable[[str], Awaitable[types.CallToolResult]]
) -> Server[Any]:
    """The MCP server whose tools are the token holder's own, plus ``ask``."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        answer = await backend.context.mcp_request("list", MCP_CONVERSATION)
        return types.ListToolsResult(tools=[*map(_tool, answer.tools), ASK_TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == ASK_TOOL.name:
            return await ask(str(arguments.get("text", "")))
        answer = await backend.context.mcp_request(
            "call", MCP_CONVERSATION, params.name, json.dumps(arguments)
        )
        return _answered(answer)

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
        answer = await backend.context.mcp_request("resource", MCP_CONVERSATION, RESOURCES[uri][0])
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


def _answered(answer: McpAnswer) -> types.CallToolResult:
    if answer.error is not None:
        return _text(answer.error, error=True)
    return _text(answer.text)
