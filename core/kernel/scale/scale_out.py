"""What one kernel process needs to share the work with others (ADR 0036).

``ScaleOut`` is the ``Scale`` seam (``core/kernel/scale/seam.py``, ADR 0052) of
processes that share PostgreSQL: the process's ``Placement`` (role and node),
the pool they use, the schedule lease, the cross-process conversation locks,
and the forwarding of replies and notifications to the node that runs their
channel. One process on SQLite uses ``LocalScale`` instead and runs none of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg

from core.config import Settings
from core.events import EventBus
from core.events.system_payloads import UserNotify
from core.events.topics import SystemTopics
from core.extensions.contract import Leadership
from core.extensions.loading.records import ExtensionRecord
from core.kernel.conversations.ledger import StoredReply
from core.kernel.scale.placement import Placement, apply_role, placement_of
from core.kernel.scale.seam import ReplySubscription, TurnHandler, subscribe_all
from core.kernel.scale.turn_lock import ConversationLocks
from core.kernel.turns.outbox import reply_key, reply_payload
from core.scheduling import LEASES_COMPONENT, SOLE_LEADER, LeaseLeader
from core.state.table import STATE_COMPONENT, NodeRoster, stamp_node
from core.storage import migrated_pool, release_pool

__all__ = ["ScaleOut"]

log = logging.getLogger("core.kernel.scale.scale_out")

ROSTER_STAMP_S = 3600.0  # how often a running node stamps its list of installed extensions


class ScaleOut:
    """Placement, schedule lease, conversation locks and forwarding of this process."""

    def __init__(
        self, settings: Settings, bus: EventBus, local_lock: Callable[[str], asyncio.Lock]
    ) -> None:
        self.settings = settings
        self.placement: Placement = placement_of(
            settings.storage, settings.kernel, settings.data_dir
        )
        self._bus = bus
        self._local_lock = local_lock
        self._pool: Any = None
        self.leader: LeaseLeader | None = None
        self._locks: ConversationLocks | None = None

    async def open(self, records: Iterable[ExtensionRecord]) -> None:
        """After the extensions are loaded: disable those another role runs; with
        PostgreSQL, open the pool and the lease table and try for the lease."""
        apply_role(self.placement, records)
        if not self.placement.shared:
            return
        storage = self.settings.storage
        assert storage.postgres_dsn is not None  # settings require it for postgres
        self._pool = await migrated_pool(storage, [LEASES_COMPONENT, STATE_COMPONENT])
        self._locks = ConversationLocks(self._local_lock, self._pool, storage.postgres_dsn)
        if self.placement.runs_workers:
            assert self.placement.node is not None
            lease_s = self.settings.scheduling.leader_lease_s
            self.leader = LeaseLeader(self._pool, self.placement.node, lease_s)
            await self.leader.try_take()
        log.info("kernel.role %s as node %s", self.placement.role, self.placement.node)

    def leadership(self) -> Leadership:
        """Whether this process fires schedules now (``context.leadership()``)."""
        if not self.placement.shared:
            return SOLE_LEADER
        if self.leader is None:  # a channels process never leads
            return Leadership(False, None)
        return self.leader.leadership()

    def turn_lock(
        self, conversation: str, message: tuple[int, str, str] | None = None
    ) -> AbstractAsyncContextManager[object]:
        """The lock a turn of ``conversation`` holds (across processes when shared);
        for a ``message`` (event id, channel id, user id), taken in message order."""
        if self._locks is None:
            return self._local_lock(conversation)
        return self._locks.hold(conversation, message)

    async def replies_sent(self, channel_id: str, user_id: str, timeout_s: float) -> None:
        """Before this process answers ``user_id`` itself: the replies other nodes
        journaled for them are sent first."""
        if self._locks is not None:
            _, subscriber = self.placement.reply_subscription
            await self._locks.replies_sent(subscriber, channel_id, user_id, timeout_s)

    def subscribe(
        self, bus: EventBus, senders: Sequence[Callable[[], None]], turns: Sequence[TurnHandler]
    ) -> None:
        """A ``channels`` process subscribes the senders, a ``workers`` one the turn
        handlers. A ``channels`` process sharing the journal declares the turn
        handlers' subscribers (ADR 0039): what its channels journal before the first
        worker ever started waits for the workers instead of being published to nobody."""
        if self.placement.runs_channels:
            for subscribe in senders:
                subscribe()
        if self.placement.runs_workers:
            subscribe_all(bus, turns)
        elif self.placement.shared:
            for topic, _handler, subscriber_id, _concurrency in turns:
                bus.declare(topic, subscriber_id)

    def answered_elsewhere(self, origin: str | None) -> bool:
        """Whether a message from node ``origin`` is answered by another process."""
        return self.placement.shared and origin is not None and origin != self.placement.node

    @property
    def reply_subscription(self) -> ReplySubscription:
        """This node's reply topic and sender; other nodes' replies one at a time, in order."""
        topic, subscriber = self.placement.reply_subscription
        return topic, subscriber, 1

    async def forward_reply(
        self, message_id: int, reply: StoredReply, origin: str | None, channel_here: bool
    ) -> bool:
        """A reply to a message another node journaled goes back through that node's
        ``system.reply.<node>``, to reach a streaming channel as the message's stream
        (the CLI's wait for its reply ends with it, ADR 0070); one whose message names
        no node (a turn resumed after an approval) for a channel another process runs
        becomes a notification for that user, which every channels process sees and
        the one running it sends."""
        if self.answered_elsewhere(origin):
            payload = reply_payload(
                message_id,
                reply.channel_id,
                reply.user_id,
                reply.text,
                reply.followup,
                as_stream=True,
            )
            await self._bus.publish(
                self.placement.reply_topic(origin),
                "kernel",
                payload,
                idempotency_key=reply_key(message_id),
            )
            return True
        if channel_here:
            return False
        for part, text in (("", reply.text), ("followup", reply.followup)):
            if text:
                notice = UserNotify(text=text, channel_id=reply.channel_id, user_id=reply.user_id)
                await self._bus.publish(
                    SystemTopics.USER_NOTIFY,
                    "kernel",
                    notice.to_payload(),
                    idempotency_key=f"{reply_key(message_id, part)}:notify",
                )
        return True

    @property
    def notify_subscriber(self) -> str:
        """One per channel-running node: each sees every notification, sends its own."""
        return self.placement.notify_subscriber

    async def forward_notice(self, notice: UserNotify, key: str | None) -> bool:
        """Journaled as ``system.user.notify`` (idempotency ``key``): its node sends it."""
        await self._bus.publish(
            SystemTopics.USER_NOTIFY, "kernel", notice.to_payload(), idempotency_key=key
        )
        return True

    def sent_elsewhere(self, channel_id: str) -> bool:
        """A channel this process does not run is another node's to send on."""
        return True

    @property
    def roster(self) -> NodeRoster | None:
        """This node among those sharing the state (``None``: the only process). Another
        node's list of installed extensions counts for as long as the journal keeps
        events (``events.retention_days``): a node gone longer than that is gone."""
        if self.placement.node is None:
            return None
        return NodeRoster(self.placement.node, self.settings.events.retention_days * 86400)

    async def run(self) -> None:
        """Until cancelled: keep or seek the schedule lease, and stamp this node's list
        of installed extensions now and then (so a long-running node's list counts)."""
        async with asyncio.TaskGroup() as group:
            if self.leader is not None:
                group.create_task(self.leader.run(), name="schedule-lease")
            if self._pool is not None and self.roster is not None:
                group.create_task(self._stamp(self.roster), name="node-roster")

    async def _stamp(self, roster: NodeRoster) -> None:
        interval = min(ROSTER_STAMP_S, roster.grace_s / 4)
        while True:
            await asyncio.sleep(interval)
            try:
                await stamp_node(self._pool, roster.node, time.time())
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning(
                    "could not stamp node %s's extensions (next try in %g s): %s",
                    roster.node,
                    interval,
                    exc,
                )

    async def aclose(self) -> None:
        """Hand the lease over at once, then give the pool back."""
        if self.leader is not None:
            await self.leader.give_up()
        if self._locks is not None:
            await self._locks.aclose()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await release_pool(pool)
