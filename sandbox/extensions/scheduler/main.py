"""The scheduler extension: durable reminders and recurring tasks (SPEC §5, §8).

Wires the parts together: ``ScheduleStore`` (SQLite in the data dir),
``Scheduler`` (validated operations), ``FireLoop`` (the service that
publishes due fires exactly once), tools and commands. ``clock`` is an
instance attribute so tests and benchmarks can drive time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.extensions.contract import Command, ExtensionContext, ShortCircuit, TurnContext
from core.extensions.sdk import BaseExtension, utc_now

from .commands import build_commands
from .firing import FireLoop
from .message import DEFAULT_FORMAT, check_format
from .model import Action, ScheduleError
from .scheduler import Scheduler
from .sentences import ReminderSentences
from .store import ScheduleStore
from .tools import build_tools
from .when import parse_remind

STORE_FILE = "schedules.db"


class SchedulerExtension(BaseExtension):
    """Lifecycle + ToolProvider + CommandProvider + ServiceProvider + InputMessagesHook
    (reminder sentences answered without a model)."""

    def __init__(self) -> None:
        self.clock = utc_now
        self.store: ScheduleStore | None = None
        self.scheduler: Scheduler | None = None
        self.loop: FireLoop | None = None
        self.sentences: ReminderSentences | None = None

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        timezone = str(context.get_config("timezone") or "local")
        grace_s = float(context.get_config("late_grace_s", 60))
        max_sleep_s = float(context.get_config("max_sleep_s", 300))
        reminder_format = check_format(str(context.get_config("reminder_format", DEFAULT_FORMAT)))
        self.store = ScheduleStore.at(context.storage, STORE_FILE)
        try:
            self.scheduler = Scheduler(self.store, timezone, self.now, self._wake)
        except ScheduleError as exc:
            raise ScheduleError(f"config timezone: {exc}") from None
        self.loop = FireLoop(
            self.store,
            self._emit,
            self.now,
            grace_s=grace_s,
            max_sleep_s=max_sleep_s,
            leadership=context.leadership,
            reminder_format=reminder_format,
        )
        if context.get_config("local_first", True):
            self.sentences = ReminderSentences(self.scheduler, context.held_notices)
        await self.store.open()

    async def start(self) -> None:
        assert self.store is not None, "initialize() was not called"
        await self.store.open()

    async def destroy(self) -> None:
        if self.store is not None:
            await self.store.close()

    # ------------------------------------------------------------ capabilities

    def get_tools(self) -> list[Any]:
        return list(build_tools(self._scheduler()))

    def get_commands(self) -> list[Command]:
        return build_commands(self._scheduler(), self.context.held_notices)

    async def on_input_messages(
        self, messages: list[dict[str, Any]], turn: TurnContext
    ) -> ShortCircuit | None:
        """``InputMessagesHook``: "remind me in 10 minutes to …", "erinnere mich …",
        "what are my reminders?", "cancel reminder 3" answered at once (``sentences.py``)."""
        if self.sentences is None or not messages or messages[-1].get("role") != "user":
            return None
        text = messages[-1].get("content")
        if not isinstance(text, str):
            return None
        reply = await self.sentences.answer(text, turn)
        return None if reply is None else ShortCircuit(reply)

    async def run_background(self) -> None:
        assert self.loop is not None, "initialize() was not called"
        await self.loop.run()

    async def schedule(
        self,
        when: str,
        text: str,
        *,
        topic: str | None = None,
        channel_id: str | None = None,
        user_id: str | None = None,
        agent_task: bool = False,
    ) -> int:
        """For other extensions (``depends_on: [scheduler]``): ``when`` as in ``/remind``
        (``10m``, ``18:30``, ``tomorrow 9:00``, ``every weekday 8:30``, a quoted cron);
        the fire is published on ``topic`` (default ``reminder.due``), for ``user_id``
        on ``channel_id`` when given.
        Returns the schedule id; raises ``ScheduleError``."""
        scheduler = self._scheduler()
        timing, text = parse_remind(f"{when} {text}", scheduler.now(), scheduler.zone)
        action: Action = "agent" if agent_task else "notify"
        created = await scheduler.add(
            timing, text, channel_id=channel_id, user_id=user_id, action=action, topic=topic
        )
        return created.id

    # ------------------------------------------------------------ helpers

    def now(self) -> datetime:
        return self.clock()

    def _wake(self) -> None:
        if self.loop is not None:
            self.loop.wake()

    async def _emit(self, topic: str, payload: dict[str, Any], key: str) -> int:
        return await self.context.emit(topic, payload, idempotency_key=key)

    def _scheduler(self) -> Scheduler:
        assert self.scheduler is not None, "initialize() was not called"
        return self.scheduler
