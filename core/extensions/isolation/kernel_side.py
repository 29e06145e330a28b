"""The kernel's end of a host's context calls: ``ExtensionContext`` over RPC.

Every request is served by the extension's ``KernelContext``, so isolated and
in-process extensions are held to exactly the same manifest rules (declared
emits and subscriptions, system topics). Parameters come from untrusted code
and are decoded into their typed payload (``messages.py``) before use. Log
lines are rate-limited (one ``LogLimiter``) and their control characters
escaped, so a plugin can neither flood the kernel's log nor forge lines in it.
State requests reach the store under this connection's extension id only (no
request names an extension), in the session the request says the host is
serving: a host can address only its own extension's state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from core.extensions.context import KernelContext
from core.extensions.contract import TurnContext
from core.extensions.errors import PermissionDeniedError
from core.extensions.isolation.messages import (
    KERNEL_NOTIFICATIONS,
    KERNEL_REQUESTS,
    AgentBackgroundParams,
    AgentTaskParams,
    AnswerRequestParams,
    ClearStateParams,
    ContextMethod,
    DeleteStateParams,
    EmitParams,
    EnrichPromptParams,
    GetStateParams,
    InvokeAgentParams,
    InvokeStreamedParams,
    ListPostProcessorsParams,
    LogParams,
    McpRequestParams,
    Notice,
    NotifyUserParams,
    RequeueParams,
    SetStateParams,
    StateValue,
    StreamKind,
    SubscribeParams,
    UiRequestParams,
    UserMessageParams,
    decode,
)
from core.extensions.isolation.ratelimit import LogLimiter
from core.extensions.served_calls import serving_extension, turn_for_token
from core.extensions.state_scope import serving
from core.runtime import escape_control

SubscribeCallback = Callable[[str, int, str], None]
StreamCall = Callable[[int, StreamKind, str], Awaitable[None]]
StateParams = GetStateParams | SetStateParams | DeleteStateParams | ClearStateParams
MAX_SESSION_ID_CHARS = 512
_ABSENT = object()


class ContextServer:
    """Answers ``ctx.*`` requests and notifications from one plugin host."""

    def __init__(
        self,
        context: KernelContext,
        *,
        subscribe: SubscribeCallback,
        stream: StreamCall,
        logger: logging.Logger,
    ) -> None:
        self._ctx = context
        self._subscribe = subscribe
        self._stream = stream
        self._logger = logger
        self.log_limiter = LogLimiter(logger, "log lines of the plugin host")

    async def handle(self, method: str, params: Any) -> Any:
        """Serve one request; unknown methods and ill-typed params are refused."""
        p = decode(KERNEL_REQUESTS, method, params)
        ctx = self._ctx
        if isinstance(p, EmitParams):
            return await ctx.emit(
                p.topic, p.payload, p.correlation_id, idempotency_key=p.idempotency_key
            )
        if isinstance(p, NotifyUserParams):
            return await ctx.notify_user(p.text, p.channel_id, user_id=p.user_id)
        if isinstance(p, AgentTaskParams):
            return await ctx.request_agent_task(p.prompt, p.channel_id)
        if isinstance(p, AgentBackgroundParams):
            return await ctx.request_agent_background(p.prompt, p.correlation_id)
        if isinstance(p, UserMessageParams):
            return await ctx.on_user_message(
                p.text,
                p.user_id,
                p.channel_id,
                p.message_id,
                idempotency_key=p.idempotency_key,
                sender_id=p.sender_id,
            )
        if isinstance(p, UiRequestParams):  # in the turn of the kernel's live call, if any
            turn = turn_for_token(ctx.extension_id, p.served)
            with serving_extension(ctx.extension_id, turn):
                return await ctx.ui_request(p.kind, p.prompt, p.options, timeout_s=p.timeout_s)
        if isinstance(p, AnswerRequestParams):
            return await ctx.answer_request(
                p.request_id, p.answer, p.user_id, sender_id=p.sender_id
            )
        if isinstance(p, InvokeAgentParams):
            return await ctx.invoke_agent(p.prompt)
        if isinstance(p, InvokeStreamedParams):
            return await self._invoke_streamed(p.prompt, p.stream)
        if isinstance(p, EnrichPromptParams):
            return await ctx.enrich_prompt(p.prompt, p.agent_id)
        if isinstance(p, ListPostProcessorsParams):
            return [list(row) for row in await ctx.list_post_processors(p.user_id, p.channel_id)]
        if isinstance(p, StateParams):
            return await self._state(p)
        if isinstance(p, RequeueParams):
            return await ctx.requeue_dead_letter(p.event_id)
        if isinstance(p, McpRequestParams):  # the desk refuses an unknown op by name
            op: Any = p.op
            return (await ctx.mcp_request(op, p.user_id, p.name, p.arguments)).to_json()
        if method == ContextMethod.LIST_COMMANDS:
            return [list(row) for row in await ctx.list_commands()]
        if method == ContextMethod.KERNEL_STATUS:
            return (await ctx.kernel_status()).to_json()
        if method == ContextMethod.LEADERSHIP:
            led = await ctx.leadership()
            return [led.leader, led.recheck_s]
        raise LookupError(f"unknown context method {method!r}")

    async def _state(self, p: StateParams) -> Any:
        """One state call, made by this extension's context in the request's session
        (and in no turn at all when it names none: never the kernel task's own)."""
        session = p.session_id
        if session is not None and not 0 < len(session) <= MAX_SESSION_ID_CHARS:
            raise ValueError(f"session_id must have 1 to {MAX_SESSION_ID_CHARS} characters")
        ctx = self._ctx
        with serving(TurnContext(session_id=session) if session else None):
            if isinstance(p, GetStateParams):
                value = await ctx.get_state(p.key, _ABSENT, scope=p.scope)
                found = value is not _ABSENT
                return StateValue(found, value if found else None).to_wire()
            if isinstance(p, SetStateParams):
                return await ctx.set_state(p.key, p.value, scope=p.scope)
            if isinstance(p, DeleteStateParams):
                return await ctx.delete_state(p.key, scope=p.scope)
            return await ctx.clear_state(scope=p.scope)

    async def _invoke_streamed(self, prompt: str, stream: int) -> str:
        async def on_chunk(text: str) -> None:
            await self._stream(stream, "chunk", text)

        async def on_tool_call(text: str) -> None:
            await self._stream(stream, "tool_call", text)

        return await self._ctx.invoke_agent_streamed(prompt, on_chunk, on_tool_call)

    def notified(self, method: str, params: Any) -> None:
        """Serve one notification; a refused one raises (the peer logs it, rate-limited)."""
        p = decode(KERNEL_NOTIFICATIONS, method, params)
        if isinstance(p, SubscribeParams):
            self._subscribe(p.topic, p.handler, p.name)
        elif isinstance(p, LogParams):
            self._log(p.level, p.name, p.message)
        elif method in (Notice.REQUEST_RESTART, Notice.REQUEST_SHUTDOWN):
            try:
                if method == Notice.REQUEST_RESTART:
                    self._ctx.request_restart()
                else:
                    self._ctx.request_shutdown()
            except PermissionDeniedError:
                return  # the context has logged the refusal; no traceback per call

    def _log(self, level: int, name: str, message: str) -> None:
        if not self.log_limiter.allow():
            return
        levelno = level if 0 <= level <= 50 else logging.INFO
        if name and name != self._logger.name:
            message = f"[{name}] {message}"
        self._logger.log(levelno, "%s", escape_control(message[:4096]))
