"""Manifest schedules: cron in a timezone, durable and exactly-once fires (SPEC §5).

The time math (cron across DST, late notes, the fire loop) lives in the
extension library ``core.extensions.sdk``, shared with the scheduler extension.
With several kernel processes one of them leads and fires (``LeaseLeader``).
"""

from core.scheduling.leadership import LEASES_COMPONENT, SOLE_LEADER, LeaseLeader
from core.scheduling.manifest_scheduler import (
    ManifestSchedule,
    ManifestScheduler,
    ScheduledTaskError,
    manifest_schedules,
)
from core.scheduling.state import FireState

__all__ = [
    "LEASES_COMPONENT",
    "SOLE_LEADER",
    "FireState",
    "LeaseLeader",
    "ManifestSchedule",
    "ManifestScheduler",
    "ScheduledTaskError",
    "manifest_schedules",
]
