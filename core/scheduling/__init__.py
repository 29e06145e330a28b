"""Manifest schedules: cron in a timezone, durable and exactly-once fires (SPEC §5)."""

from core.scheduling.cron import CronError, local_zone, next_fire, resolve_zone, to_instant
from core.scheduling.manifest_scheduler import (
    SCHEDULE_FIRE_TOPIC,
    ManifestSchedule,
    ManifestScheduler,
    ScheduledTaskError,
    late_note,
    manifest_schedules,
    utc_now,
)
from core.scheduling.state import FireState

__all__ = [
    "SCHEDULE_FIRE_TOPIC",
    "CronError",
    "FireState",
    "ManifestSchedule",
    "ManifestScheduler",
    "ScheduledTaskError",
    "late_note",
    "local_zone",
    "manifest_schedules",
    "next_fire",
    "resolve_zone",
    "to_instant",
    "utc_now",
]
