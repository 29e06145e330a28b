"""Manifest schedules: cron in a timezone, durable and exactly-once fires (SPEC §5).

The time math (cron across DST, late notes, the fire loop) lives in the
extension library ``core.extensions.sdk``, shared with the scheduler extension.
"""

from core.scheduling.manifest_scheduler import (
    SCHEDULE_FIRE_TOPIC,
    ManifestSchedule,
    ManifestScheduler,
    ScheduledTaskError,
    manifest_schedules,
)
from core.scheduling.state import FireState

__all__ = [
    "SCHEDULE_FIRE_TOPIC",
    "FireState",
    "ManifestSchedule",
    "ManifestScheduler",
    "ScheduledTaskError",
    "manifest_schedules",
]
