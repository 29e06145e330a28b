"""The kernel's end of a host's context calls: ``ExtensionContext`` over RPC.

Every request is served by the extension's ``KernelContext``, so isolated and
in-process extensions are held to exactly the same manifest rules (declared
emits and subscriptions, system topics). Parameters come from untrusted code
and are checked for type before use. Log lines are rate-limited so a
flooding plugin cannot flood the kernel's log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from core.extensions.context import KernelContext
from core.extensions.errors import PermissionDeniedError

SubscribeCallback = Callable[[str, int, str], None]
StreamCall = Callable[[int, str, str], Awaitable[None]]

LOG_RATE_PER_S = 50.0
LOG_BURST = 200.0


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
        self._tokens = LOG_BURST
        self._refilled = time.monotonic()
        self._dropped = 0

    async def handle(self, method: str, params: Any) -> Any:
        p = params if isinstance(params, dict) else {}
        ctx = self._ctx
        if method == "ctx.emit":
            return await ctx.emit(
                _str(p, "topic"),
                _dict(p, "payload"),
                _opt(p, "correlation_id"),
                idempotency_key=_opt(p, "idempotency_key"),
            )
        if method == "ctx.notify_user":
            return await ctx.notify_user(_str(p, "text"), _opt(p, "channel_id"))
        if method == "ctx.request_agent_task":
            return await ctx.request_agent_task(_str(p, "prompt"), _opt(p, "channel_id"))
        if method == "ctx.request_agent_background":
            return await ctx.request_agent_background(_str(p, "prompt"), _opt(p, "correlation_id"))
        if method == "ctx.on_user_message":
            return await ctx.on_user_message(
                _str(p, "text"),
                _str(p, "user_id"),
                _opt(p, "channel_id"),
                _opt(p, "message_id"),
                idempotency_key=_opt(p, "idempotency_key"),
            )
        if method == "ctx.invoke_agent":
            return await ctx.invoke_agent(_str(p, "prompt"))
        if method == "ctx.invoke_agent_streamed":
            return await self._invoke_streamed(_str(p, "prompt"), p.get("stream"))
        if method == "ctx.list_commands":
            return [list(row) for row in await ctx.list_commands()]
        if method == "ctx.enrich_prompt":
            return await ctx.enrich_prompt(_str(p, "prompt"), _opt(p, "agent_id"))
        raise LookupError(f"unknown context method {method!r}")

    async def _invoke_streamed(self, prompt: str, stream: Any) -> str:
        if not isinstance(stream, int):
            raise TypeError(f"stream must be an integer id, got {stream!r}")

        async def on_chunk(text: str) -> None:
            await self._stream(stream, "chunk", text)

        async def on_tool_call(text: str) -> None:
            await self._stream(stream, "tool_call", text)

        return await self._ctx.invoke_agent_streamed(prompt, on_chunk, on_tool_call)

    def notified(self, method: str, params: Any) -> None:
        p = params if isinstance(params, dict) else {}
        if method == "ctx.subscribe":
            handler = p.get("handler")
            if not isinstance(handler, int):
                raise TypeError(f"handler must be an integer id, got {handler!r}")
            self._subscribe(_str(p, "topic"), handler, _str(p, "name"))
        elif method == "log":
            self._log(p.get("level"), str(p.get("name", "")), str(p.get("message", "")))
        elif method in ("ctx.request_restart", "ctx.request_shutdown"):
            try:
                if method == "ctx.request_restart":
                    self._ctx.request_restart()
                else:
                    self._ctx.request_shutdown()
            except PermissionDeniedError:
                return  # the context has logged the refusal; no traceback per call
        else:
            raise LookupError(f"unknown notification {method!r}")

    def _log(self, level: Any, name: str, message: str) -> None:
        now = time.monotonic()
        self._tokens = min(LOG_BURST, self._tokens + (now - self._refilled) * LOG_RATE_PER_S)
        self._refilled = now
        if self._tokens < 1:
            self._dropped += 1
            return
        self._tokens -= 1
        if self._dropped:
            self._logger.warning(
                "%d log lines of the plugin host dropped (rate limit)", self._dropped
            )
            self._dropped = 0
        levelno = level if isinstance(level, int) and 0 <= level <= 50 else logging.INFO
        if name and name != self._logger.name:
            message = f"[{name}] {message}"
        self._logger.log(levelno, "%s", message[:4096])


def _str(params: dict[str, Any], key: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string, got {type(value).__name__}")
    return value


def _opt(params: dict[str, Any], key: str) -> str | None:
    value = params.get(key)
    return None if value is None else _str(params, key)


def _dict(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = params.get(key)
    if not isinstance(value, dict):
        raise TypeError(f"{key} must be a JSON object, got {type(value).__name__}")
    return value
