"""The seam between one kernel process and the others it may share the work with.

Everything the turn path needs to know about other kernel processes goes
through one ``Scale`` (ADR 0052): which handlers this process subscribes, the
lock a turn holds, whether a reply first waits for the replies other nodes
journaled, and where a reply or a notification goes when its channel is
another node's. The router, the outbox and the notices call it and never ask
"are there other processes?".

``LocalScale`` is the null object one process on SQLite uses: every handler
subscribed, the conversation's ``asyncio.Lock`` as the turn lock, nothing to
wait for, nothing forwarded — no placement or PostgreSQL code runs in its
turns. ``ScaleOut`` (``core/kernel/scale/scale_out.py``, ADR 0036) is the one used
when processes share PostgreSQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from core.events import EventBus
from core.events.subscriptions import EventHandler
from core.events.system_payloads import UserNotify
from core.events.topics import SystemTopics
from core.extensions.contract import Leadership
from core.extensions.loading.records import ExtensionRecord
from core.kernel.conversations.ledger import StoredReply
from core.kernel.scale.placement import NOTIFY_SUBSCRIBER, REPLY_SUBSCRIBER, Placement
from core.scheduling import SOLE_LEADER
from core.state.table import NodeRoster

__all__ = [
    "RETRY_CONCURRENCY",
    "LocalScale",
    "ReplySubscription",
    "Scale",
    "TurnHandler",
    "TurnLock",
    "subscribe_all",
]

RETRY_CONCURRENCY = 8  # one process: failed replies are retried this many at a time

# (topic, handler, subscriber id, concurrency) of one turn-side handler
TurnHandler = tuple[str, EventHandler, str, int]
# (topic, subscriber id, concurrency) of the replies this process sends
ReplySubscription = tuple[str, str, int]
# (conversation key, (event id, channel id, user id) of the message or None) -> its lock
TurnLock = Callable[[str, tuple[int, str, str] | None], AbstractAsyncContextManager[object]]


class Scale(Protocol):
    """What the kernel and its turn path ask about the other processes (if any)."""

    @property
    def placement(self) -> Placement:
        """This process's role and node (``Placement()``: the only process)."""
        ...

    @property
    def roster(self) -> NodeRoster | None:
        """This node among those sharing the state (``None``: the only process)."""
        ...

    def leadership(self) -> Leadership:
        """Whether this process fires schedules now (``context.leadership()``)."""
        ...

    async def open(self, records: Iterable[ExtensionRecord]) -> None:
        """After the extensions are loaded: take this role's share of them."""
        ...

    async def run(self) -> None:
        """The long-lived work of the seam (a lease), until cancelled; may return at once."""
        ...

    async def aclose(self) -> None: ...

    # ------------------------------------------------------------ the turn path

    def subscribe(
        self, bus: EventBus, senders: Sequence[Callable[[], None]], turns: Sequence[TurnHandler]
    ) -> None:
        """Subscribe this process's share: the reply and notification ``senders``
        (each subscribes itself) and the ``turns`` handlers."""
        ...

    def turn_lock(
        self, conversation: str, message: tuple[int, str, str] | None = None
    ) -> AbstractAsyncContextManager[object]:
        """The lock a turn of ``conversation`` holds; for a ``message`` (event id,
        channel id, user id), taken in message order."""
        ...

    async def replies_sent(self, channel_id: str, user_id: str, timeout_s: float) -> None:
        """Before this process answers ``user_id`` itself: other nodes' replies first."""
        ...

    def answered_elsewhere(self, origin: str | None) -> bool:
        """Whether a message journaled by node ``origin`` is answered by another process."""
        ...

    @property
    def reply_subscription(self) -> ReplySubscription:
        """Where the replies this process retries are journaled and who sends them."""
        ...

    async def forward_reply(
        self, message_id: int, reply: StoredReply, origin: str | None, channel_here: bool
    ) -> bool:
        """Hand ``reply`` to the process that runs its channel; ``False``: it is this one's."""
        ...

    @property
    def notify_subscriber(self) -> str:
        """The subscriber id of this process's notification sender."""
        ...

    async def forward_notice(self, notice: UserNotify, key: str | None) -> bool:
        """Hand a notification for a channel this process does not run to the process
        that runs it; ``False``: there is no other (the default channel takes it)."""
        ...

    def sent_elsewhere(self, channel_id: str) -> bool:
        """Whether a notification for ``channel_id``, which this process does not run,
        is another process's to send (else the default channel takes it)."""
        ...


def subscribe_all(bus: EventBus, turns: Iterable[TurnHandler]) -> None:
    """Subscribe every turn handler (a process that runs the turns)."""
    for topic, handler, subscriber_id, concurrency in turns:
        bus.subscribe(topic, handler, subscriber_id, concurrency=concurrency)


class LocalScale:
    """The only kernel process: runs everything, locks in process, forwards nothing."""

    def __init__(self, local_lock: Callable[[str], asyncio.Lock]) -> None:
        self._local_lock = local_lock
        self.placement = Placement()
        self.roster: NodeRoster | None = None
        self.reply_subscription: ReplySubscription = (
            SystemTopics.REPLY,
            REPLY_SUBSCRIBER,
            RETRY_CONCURRENCY,
        )
        self.notify_subscriber = NOTIFY_SUBSCRIBER

    def leadership(self) -> Leadership:
        return SOLE_LEADER

    async def open(self, records: Iterable[ExtensionRecord]) -> None:
        return None

    async def run(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def subscribe(
        self, bus: EventBus, senders: Sequence[Callable[[], None]], turns: Sequence[TurnHandler]
    ) -> None:
        for subscribe in senders:
            subscribe()
        subscribe_all(bus, turns)

    def turn_lock(
        self, conversation: str, message: tuple[int, str, str] | None = None
    ) -> AbstractAsyncContextManager[object]:
        return self._local_lock(conversation)

    async def replies_sent(self, channel_id: str, user_id: str, timeout_s: float) -> None:
        return None

    def answered_elsewhere(self, origin: str | None) -> bool:
        return False

    async def forward_reply(
        self, message_id: int, reply: StoredReply, origin: str | None, channel_here: bool
    ) -> bool:
        return False

    async def forward_notice(self, notice: UserNotify, key: str | None) -> bool:
        return False

    def sent_elsewhere(self, channel_id: str) -> bool:
        return False
