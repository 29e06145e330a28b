"""Proactive messages (``notify_user``): on a channel of this process, or through the
journal to the process that runs it (ADR 0017, ADR 0036).

With one process a notification goes to the named channel, else to the
default one. With several on one PostgreSQL, a channel this process does not
run is reached by journaling ``system.user.notify`` (with an idempotency key,
so a retried handler forwards it once); every channels process has its own
``kernel.notify.<node>`` subscriber, sees every notification and sends those
for the channels it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from core.events import EventBus
from core.events.models import Event
from core.events.system_payloads import UserNotify, read_system_payload
from core.events.topics import SystemTopics
from core.kernel.scale.seam import Scale

__all__ = ["Notices"]

log = logging.getLogger("core.kernel.turns.notices")


class Notices:
    """Sends proactive messages where the channel lives; subscribes the sender."""

    def __init__(
        self,
        bus: EventBus,
        channels: Mapping[str, Any],
        default_channel: str,
        scale: Scale,
    ) -> None:
        self._bus = bus
        self._channels = channels  # the router's live table
        self.default_channel = default_channel
        self._scale = scale

    def subscribe(self) -> None:
        """The notification sender of a process that runs channels."""
        self._bus.subscribe(
            SystemTopics.USER_NOTIFY,
            self._on_notify,
            self._scale.notify_subscriber,
            concurrency=8,
        )

    async def notify_user(
        self,
        text: str,
        channel_id: str | None = None,
        *,
        user_id: str | None = None,
        key: str | None = None,
    ) -> None:
        """Deliver a proactive message on the named or the default channel: to
        ``user_id`` there (``send_to_user``) when given, else to the channel's own
        default target (``send_message``). A user id belongs to its channel, so a
        fallback to the default channel drops it (ADR 0017). With several
        processes, a channel this one does not run is reached through the journal
        (``system.user.notify``, idempotency ``key``): its own node sends it."""
        target = channel_id or self.default_channel
        if target not in self._channels:
            notice = UserNotify(text=text, channel_id=channel_id, user_id=user_id)
            if await self._scale.forward_notice(notice, key):
                return
        await self.send_here(text, channel_id, user_id)

    async def send_here(self, text: str, channel_id: str | None, user_id: str | None) -> None:
        """Send on a channel of this process (with several processes, one it does not
        run is left to the process that does)."""
        target = channel_id or self.default_channel
        channel = self._channels.get(target)
        if channel is None and self._scale.sent_elsewhere(target):
            return  # another node runs that channel and sends it
        if channel is None:
            channel, user_id = self._channels.get(self.default_channel), None
        if channel is None:
            log.warning("no channel %r for a notification; dropping: %.80s", target, text)
            return
        if user_id:
            await channel.send_to_user(user_id, text)
        else:
            await channel.send_message(text)

    async def _on_notify(self, event: Event) -> None:
        notice = read_system_payload(UserNotify, event, subscriber="kernel.notify")
        if notice is not None and notice.text:
            await self.send_here(notice.text, notice.channel_id, notice.user_id)
