"""Shared pieces of the scheduler tests: a hand-driven clock, the real extension
installed into a test's extension root, and a reader for what a channel received."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import PROJECT_ROOT

SCHEDULER_DIR = PROJECT_ROOT / "sandbox" / "extensions" / "scheduler"


class FakeClock:
    """``clock()`` returns a time the test moves with ``advance``/``set``."""

    def __init__(self, start: datetime) -> None:
        self.now = start.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now

    def set(self, moment: datetime) -> datetime:
        self.now = moment.astimezone(UTC)
        return self.now


def install_scheduler(ext_root: Path) -> Path:
    """Link the real scheduler extension into ``ext_root`` (its data goes to the test's dir)."""
    link = ext_root / "scheduler"
    link.symlink_to(SCHEDULER_DIR, target_is_directory=True)
    return link


def notified(kernel, channel: str = "capture") -> list[str]:
    return [text for kind, _, text in kernel.loader.instance(channel)._log() if kind == "notify"]


def replied(kernel, channel: str = "capture") -> list[str]:
    return [text for kind, _, text in kernel.loader.instance(channel)._log() if kind == "reply"]
