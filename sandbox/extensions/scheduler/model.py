"""What a schedule is: its timing, what it does when due, and the user-facing error."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Kind = Literal["once", "cron", "interval"]
Action = Literal["notify", "agent"]
Status = Literal["active", "done", "cancelled"]

DEFAULT_TOPIC = "reminder.due"
AGENT_TASK_TOPIC = "system.agent.task"


class ScheduleError(ValueError):
    """Bad input or an impossible request; the message is one line shown to the user."""


@dataclass(frozen=True, slots=True)
class Timing:
    """When a schedule fires: once at an instant, on a cron expression, or every N seconds."""

    kind: Kind
    at: datetime | None = None
    cron: str | None = None
    every_s: int | None = None
    note: str = ""  # why the due time differs from what was typed (a DST gap); not stored

    @classmethod
    def once(cls, at: datetime) -> Timing:
        return cls("once", at=at)

    @classmethod
    def on_cron(cls, expr: str) -> Timing:
        return cls("cron", cron=expr)

    @classmethod
    def every(cls, seconds: int) -> Timing:
        return cls("interval", every_s=seconds)

    @property
    def spec(self) -> str:
        """What the store keeps besides the next due time: ``""``, the expression, the seconds."""
        if self.kind == "cron":
            return self.cron or ""
        if self.kind == "interval":
            return str(self.every_s)
        return ""


@dataclass(frozen=True, slots=True)
class Schedule:
    """One stored schedule. Instants are aware UTC datetimes."""

    id: int
    text: str
    kind: Kind
    spec: str
    timezone: str
    next_due: datetime
    channel_id: str | None
    action: Action
    topic: str
    created_at: datetime
    last_due: datetime | None
    fires: int
    status: Status
    user_id: str | None = None  # the address on channel_id that set it (ADR 0017)
    person: str | None = None  # whose it is (``TurnContext.person_key``; None: the owner)

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    @property
    def every_s(self) -> int:
        return int(self.spec) if self.kind == "interval" else 0
