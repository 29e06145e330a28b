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
from typing import Protocol

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from core.extensions.contract import ExtensionContext, McpAnswer, McpOp
from core.extensions.sdk.mcp_front import build_mcp_server

from .auth import TokenCheck
from .config import ApiConfig
from .notifications import Notifications
from .openai_shape import ApiError, Ask
from .replies import PendingReply, ReplyGoneError

MCP_PATH = "/mcp"
MCP_CONVERSATION = "mcp"  # the conversation of ``ask``, and where a member's reminders land


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
        self._server = build_mcp_server(self)
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

    async def request(self, op: McpOp, name: str | None = None, arguments: str = "") -> McpAnswer:
        """The token holder's tools and resources, through the kernel's MCP desk."""
        context = self._backend.context
        return await context.mcp_request(op, MCP_CONVERSATION, name, arguments or "{}")

    async def ask(self, text: str) -> McpAnswer:
        """One chat message of conversation ``mcp``; the answer is its reply, or — when
        the turn paused to ask first, or the message answered such a question — what
        this channel sends the conversation next (the question, the resumed turn's
        reply), as ``main.py mcp``'s answers are (ADR 0059)."""
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
                        return McpAnswer("\n\n".join(texts))
        except TimeoutError:
            return McpAnswer(error=f"no reply within {timeout_s:g} s")
        except ReplyGoneError as exc:
            return McpAnswer(error=str(exc))
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
