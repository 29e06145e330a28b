"""Event handlers an extension subscribes, as the kernel wraps them.

``logged_handler`` logs a failure under the extension's logger and re-raises
(the bus retries); ``when_wired`` drops events that arrive while the
extension is not active (its subscription outlives it in the durable bus).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from core.events.models import Event
from core.extensions.contract import EventHandler

__all__ = ["logged_handler", "when_wired"]


def logged_handler(handler: EventHandler, logger: logging.Logger) -> EventHandler:
    """Log a failing handler's error under the extension's logger, then re-raise
    so the bus retries it."""

    async def run(event: Event) -> None:
        try:
            await handler(event)
        except Exception:
            logger.exception("handler for %s (event %s) failed", event.topic, event.id)
            raise

    run.__qualname__ = getattr(handler, "__qualname__", "handler")
    return run


def when_wired(
    ext_id: str, is_wired: Callable[[str], bool], logger: logging.Logger
) -> Callable[[EventHandler], EventHandler]:
    """Deliver to the handler only while the extension is wired (active and started)."""

    def wrap(handler: EventHandler) -> EventHandler:
        async def run(event: Event) -> None:
            if not is_wired(ext_id):
                logger.warning("not active: event %s (%s) not delivered", event.id, event.topic)
                return
            await handler(event)

        run.__qualname__ = getattr(handler, "__qualname__", "handler")
        return run

    return wrap
