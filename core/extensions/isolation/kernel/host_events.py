"""Bus subscriptions of one isolated extension (kernel side).

The bus subscription outlives plugin hosts: a restarted host subscribes its
handlers again under the same ``(topic, name)``, and the forwarder then
delivers to the new host's handler id. Subscriptions the kernel refuses
(permissions, ``loader.max_subscriptions``) are logged through one
``LogLimiter``, so a host sending thousands of them costs a few lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from core.events.models import Event
from core.extensions.context.kernel_context import KernelContext
from core.extensions.isolation.protocol.errors import HostUnavailableError
from core.extensions.isolation.protocol.ratelimit import LogLimiter
from core.extensions.loading.lifecycle import describe_exception

Deliver = Callable[[int, Event], Awaitable[None]]


class HostSubscriptions:
    """``(topic, handler name)`` → the current host's handler id (``None`` while it restarts)."""

    def __init__(
        self,
        ext_id: str,
        logger: logging.Logger,
        *,
        deliver: Deliver,
        live: asyncio.Event,
        wait_s: Callable[[], float],
    ) -> None:
        self._ext_id = ext_id
        self._deliver = deliver
        self._live = live
        self._wait_s = wait_s
        self._handlers: dict[tuple[str, str], int | None] = {}
        self.refused = LogLimiter(logger, "refused subscriptions", rate_per_s=1, burst=10)

    def host_replaced(self) -> None:
        """A new host is starting: its handlers have no ids until it subscribes them."""
        for key in self._handlers:
            self._handlers[key] = None

    def subscribe(self, context: KernelContext, topic: str, handler_id: int, name: str) -> None:
        """The host subscribed a handler: point the (possibly new) bus subscription at it."""
        key = (topic, name)
        known = key in self._handlers
        self._handlers[key] = handler_id
        if known:
            return
        forward = self._forwarder(key)
        forward.__qualname__ = name
        try:
            context.subscribe_event(topic, forward)
        except Exception as exc:
            del self._handlers[key]
            reason = describe_exception(exc)
            self.refused.log(logging.ERROR, "subscription to %s refused: %s", topic, reason)

    def _forwarder(self, key: tuple[str, str]) -> Any:
        async def forward(event: Event) -> None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._wait_s()):
                    await self._live.wait()
            handler_id = self._handlers.get(key)
            if handler_id is None:
                raise HostUnavailableError(self._ext_id, f"no handler for {key[0]!r} in the host")
            await self._deliver(handler_id, event)

        return forward
