"""Proactive messages (``notify_user``): on a channel of this process, or through the
journal to the process that runs it (ADR 0017, ADR 0036).

With one process a notification goes to the named channel. When that
channel is not loaded, a notice addressed to someone other than the owner
(a member, a group chat, an identity nobody lists) waits for it, durably
(``HeldNotices``), and is sent when the channel is wired again — never to
another person's channel (ADR 0076); the owner's, and one addressed to no one,
go to the default channel as before. With several processes on one
PostgreSQL, a channel this process does not run is reached by journaling
``system.user.notify`` (with an idempotency key, so a retried handler forwards
it once); every channels process has its own ``kernel.notify.<node>``
subscriber, sees every notification and sends those for the channels it runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from core.events import EventBus
from core.events.models import Event
from core.events.system_payloads import UserNotify, read_system_payload
from core.events.topics import SystemTopics
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.conversations.people import Household
from core.kernel.scale.seam import Scale
from core.kernel.turns.held import HeldNotices

__all__ = ["KERNEL_SOURCE", "Notices"]

log = logging.getLogger("core.kernel.turns.notices")

KERNEL_SOURCE = "kernel"  # who sends a notice the kernel makes (a budget notice, an answer)


class Notices:
    """Sends proactive messages where the channel lives; subscribes the sender."""

    def __init__(
        self,
        bus: EventBus,
        channels: Mapping[str, Any],
        default_channel: str,
        scale: Scale,
        household: Household,
        held: HeldNotices,
        *,
        send_timeout_s: float = 30.0,
    ) -> None:
        self._bus = bus
        self._channels = channels  # the router's live table
        self.default_channel = default_channel
        self._scale = scale
        self._household = household
        self.held = held
        self._send_timeout_s = send_timeout_s  # each held notice's send (turns.send_timeout_s)
        self._releasing = asyncio.Lock()
        self._releases: set[asyncio.Task[int]] = set()
        self._up_before_start: set[str] = set()

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
        source: str = KERNEL_SOURCE,
    ) -> None:
        """Deliver a proactive message on the named or the default channel: to
        ``user_id`` there (``send_to_user``) when given, else to the channel's own
        default target (``send_message``). A user id belongs to its channel, so a
        fallback to the default channel drops it (ADR 0017) — and is only taken for
        the owner's: anyone else's waits for its channel (ADR 0076). With several
        processes, a channel this one does not run is reached through the journal
        (``system.user.notify``, idempotency ``key``): its own node sends it.
        ``source``: the extension that sends it (what it may ask about, ``waiting``)."""
        target = channel_id or self.default_channel
        if target not in self._channels:
            notice = UserNotify(text=text, channel_id=channel_id, user_id=user_id)
            if await self._scale.forward_notice(notice, key):
                return
        await self.send_here(text, channel_id, user_id, key, source)

    async def send_here(
        self,
        text: str,
        channel_id: str | None,
        user_id: str | None,
        key: str | None = None,
        source: str = KERNEL_SOURCE,
    ) -> None:
        """Send on a channel of this process (with several processes, one it does not
        run is left to the process that does). When the channel is not loaded, a
        notice for anyone but the owner is held for it (idempotency ``key``)."""
        target = channel_id or self.default_channel
        channel = self._channels.get(target)
        if channel is None and self._scale.sent_elsewhere(target):
            return  # another node runs that channel and sends it
        if channel is None and user_id and self._household.key_of(target, user_id) is not None:
            if await self._hold(text, target, user_id, key, source):
                return
            channel = self._channels.get(target)  # it came up meanwhile
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
            key = f"notify:{event.id}"  # a re-delivered event is held once
            await self.send_here(notice.text, notice.channel_id, notice.user_id, key, event.source)

    # ------------------------------------------------------------ held notices

    async def _hold(
        self, text: str, channel_id: str, user_id: str, key: str | None, source: str
    ) -> bool:
        """Keep a notice for ``channel_id`` unless it is up by now (``False``): under the
        release lock, so a channel coming up meanwhile sends it once, never misses it."""
        async with self._releasing:
            if channel_id in self._channels:
                return False
            await self.held.hold(channel_id, user_id, text, key, source)
        log.info(
            "channel %r is not loaded: a notification for %s waits for it", channel_id, user_id
        )
        return True

    def channel_up(self, channel_id: str) -> None:
        """``channel_id`` is wired: send what waits for it (in a task of this object's,
        awaited by ``aclose``); one wired while the kernel is built, before its loop
        runs, when the kernel starts (``start``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._up_before_start.add(channel_id)
            return
        task = asyncio.create_task(self.release(channel_id), name=f"held-notices:{channel_id}")
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    def start(self) -> None:
        """The kernel runs: send what waits for the channels wired before it did."""
        for channel_id in sorted(self._up_before_start):
            self.channel_up(channel_id)
        self._up_before_start.clear()

    async def release(self, channel_id: str) -> int:
        """Send every notice held for ``channel_id``, oldest first, each deleted once its
        channel took it (one that fails stays, with those after it, for the next time
        the channel comes up). How many were sent."""
        sent = 0
        async with self._releasing:  # one release at a time: each notice is sent once
            try:
                for notice in await self.held.waiting(channel_id):
                    channel = self._channels.get(channel_id)
                    if channel is None:
                        break  # gone again meanwhile
                    async with asyncio.timeout(self._send_timeout_s):
                        await channel.send_to_user(notice.user_id, notice.text)
                    await self.held.release(notice.key)
                    sent += 1
            except Exception as exc:
                log.warning(
                    "held notifications for %r: %s (kept for its next start)",
                    channel_id,
                    describe_exception(exc),
                )
        if sent:
            log.info("sent %d held notification(s) on %r", sent, channel_id)
        return sent

    async def waiting(self, source: str, channel_id: str, user_id: str) -> list[str]:
        """What ``source`` sent to ``user_id`` on ``channel_id`` that waits for that
        channel, oldest first (``context.held_notices``: only an extension's own)."""
        return [n.text for n in await self.held.waiting(channel_id, user_id, source)]

    async def aclose(self) -> None:
        """Finish the releases under way, then close the held notices' store."""
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
        await self.held.aclose()
