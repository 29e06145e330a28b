"""The kernel's end of a host's context calls: ``ExtensionContext`` over RPC.

Every request is served by the extension's ``KernelContext``, so isolated and
in-process extensions are held to exactly the same manifest rules (declared
emits and subscriptions, system topics). Which requests exist, and the type of
each parameter, come from the contract's protocol (``context_calls``, ADR
0050); parameters come from untrusted code and are checked against those
types before use. Log
lines are rate-limited (one ``LogLimiter``) and their control characters
escaped, so a plugin can neither flood the kernel's log nor forge lines in it.
State requests reach the store under this connection's extension id only (no
request names an extension), in the session the request says the host is
serving: a host can address only its own extension's state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from core.extensions.access.served_calls import serving_extension, turn_for_token
from core.extensions.access.state_scope import serving
from core.extensions.context.kernel_context import KernelContext
from core.extensions.contract import TurnContext
from core.extensions.errors import PermissionDeniedError
from core.extensions.isolation.protocol.context_calls import CONTEXT_CALLS, ContextCall
from core.extensions.isolation.protocol.messages import (
    KERNEL_NOTIFICATIONS,
    LogParams,
    StateValue,
    StreamKind,
    SubscribeParams,
    decode,
)
from core.extensions.isolation.protocol.ratelimit import LogLimiter
from core.extensions.isolation.protocol.wire import plain
from core.runtime import escape_control

SubscribeCallback = Callable[[str, int, str], None]
StreamCall = Callable[[int, StreamKind, str], Awaitable[None]]
MAX_SESSION_ID_CHARS = 512
STATE_CALLS = frozenset({"get_state", "set_state", "delete_state", "clear_state"})
_ABSENT = object()


class ContextServer:
    """Answers ``ctx.*`` requests and notifications from one plugin host.

    The calls are the contract protocol's (``context_calls``): a name that is not
    one is refused before anything of the context is touched, so a host reaches
    no other attribute of ``KernelContext`` (``request_reload``, ``_publish``, …).
    """

    def __init__(
        self,
        context: KernelContext,
        *,
        subscribe: SubscribeCallback,
        stream: StreamCall,
        logger: logging.Logger,
        calls: Mapping[str, ContextCall] | None = None,
    ) -> None:
        self._ctx = context
        self._subscribe = subscribe
        self._stream = stream
        self._logger = logger
        self._calls = CONTEXT_CALLS if calls is None else calls  # derived at import
        self.log_limiter = LogLimiter(logger, "log lines of the plugin host")

    async def handle(self, method: str, params: Any) -> Any:
        """Serve one request; unknown methods and ill-typed params are refused."""
        call = self._calls.get(method)
        if call is None or call.notice:
            raise LookupError(f"unknown method {method[:80]!r}")
        arguments = call.decode(params)
        name = call.name
        if name in STATE_CALLS:
            return await self._state(name, arguments)
        if name == "ui_request":  # in the turn of the kernel's live call, if any
            turn = turn_for_token(self._ctx.extension_id, arguments.pop("served"))
            with serving_extension(self._ctx.extension_id, turn):
                return await self._ctx.ui_request(**arguments)
        if name == "invoke_agent_streamed":
            return await self._invoke_streamed(arguments["prompt"], arguments["stream"])
        return plain(await getattr(self._ctx, name)(**arguments))

    async def _state(self, name: str, arguments: dict[str, Any]) -> Any:
        """One state call, made by this extension's context in the request's session
        (and in no turn at all when it names none: never the kernel task's own)."""
        session = arguments.pop("session_id")
        if session is not None and not 0 < len(session) <= MAX_SESSION_ID_CHARS:
            raise ValueError(f"session_id must have 1 to {MAX_SESSION_ID_CHARS} characters")
        with serving(TurnContext(session_id=session) if session else None):
            if name == "get_state":
                value = await self._ctx.get_state(default=_ABSENT, **arguments)
                found = value is not _ABSENT
                return StateValue(found, value if found else None).to_wire()
            return await getattr(self._ctx, name)(**arguments)

    async def _invoke_streamed(self, prompt: str, stream: int) -> str:
        async def on_chunk(text: str) -> None:
            await self._stream(stream, "chunk", text)

        async def on_tool_call(text: str) -> None:
            await self._stream(stream, "tool_call", text)

        return await self._ctx.invoke_agent_streamed(prompt, on_chunk, on_tool_call)

    def notified(self, method: str, params: Any) -> None:
        """Serve one notification; a refused one raises (the peer logs it, rate-limited)."""
        call = self._calls.get(method)
        if call is not None and call.notice:
            try:
                getattr(self._ctx, call.name)(**call.decode(params))
            except PermissionDeniedError:
                return  # the context has logged the refusal; no traceback per call
            return
        p = decode(KERNEL_NOTIFICATIONS, method, params)
        if isinstance(p, SubscribeParams):
            self._subscribe(p.topic, p.handler, p.name)
        elif isinstance(p, LogParams):
            self._log(p.level, p.name, p.message)

    def _log(self, level: int, name: str, message: str) -> None:
        if not self.log_limiter.allow():
            return
        levelno = level if 0 <= level <= 50 else logging.INFO
        if name and name != self._logger.name:
            message = f"[{name}] {message}"
        self._logger.log(levelno, "%s", escape_control(message[:4096]))
