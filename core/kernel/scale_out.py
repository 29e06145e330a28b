"""What one kernel process needs to share the work with others (ADR 0036).

``ScaleOut`` bundles, for the runner, the process's ``Placement`` (role and
node), and with PostgreSQL the pool they use, the schedule lease and the
cross-process conversation locks. With SQLite it is inert: one process,
always the leader, in-process locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg

from core.config import Settings
from core.extensions.contract import Leadership
from core.extensions.records import ExtensionRecord
from core.kernel.placement import Placement, apply_role, placement_of
from core.kernel.turn_lock import ConversationLocks
from core.scheduling import LEASES_COMPONENT, SOLE_LEADER, LeaseLeader
from core.state.table import STATE_COMPONENT, NodeRoster, stamp_node
from core.storage import migrated_pool, release_pool

__all__ = ["ScaleOut"]

log = logging.getLogger("core.kernel.scale_out")

ROSTER_STAMP_S = 3600.0  # how often a running node stamps its list of installed extensions


class ScaleOut:
    """Placement, schedule lease and conversation locks of this kernel process."""

    def __init__(self, settings: Settings, local_lock: Callable[[str], asyncio.Lock]) -> None:
        self.settings = settings
        self.placement: Placement = placement_of(settings)
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
        journaled for them are sent first (no-op with one process)."""
        if self._locks is not None:
            _, subscriber = self.placement.reply_subscription
            await self._locks.replies_sent(subscriber, channel_id, user_id, timeout_s)

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
