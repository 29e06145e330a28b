"""Reminder benchmark: lateness (delivered - due) of 200 one-shot reminders due
within 20 s, while the bus also carries 1,000 other events. Prints one JSON object.

A whole kernel runs in this process (real loader, bus, scheduler extension, data
in a temp dir). A channel extension stamps each proactive message with
``time.time()`` when the kernel hands it over; the reminders are created through
the scheduler's own API with due times spread evenly over 1..20 s; the other
events are published at random moments over the same window on a topic with a
subscriber of its own. Targets: p50 < 100 ms, p99 < 1 s.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.config import load_settings  # noqa: E402
from core.kernel.runner import Kernel  # noqa: E402

REMINDERS = 200
OTHER_EVENTS = 1000
WINDOW_S = 20.0
FIRST_DUE_S = 1.0

STAMPING_CHANNEL = """
import time


class Ext:
    def __init__(self):
        self.received = []

    async def initialize(self, context):
        self.ctx = context

    async def start(self):
        pass

    async def stop(self):
        pass

    async def destroy(self):
        pass

    def health_check(self):
        return True

    async def send_to_user(self, user_id, message):
        pass

    async def send_message(self, message):
        self.received.append((time.time(), message))
"""


def _setup(tmp: Path) -> Path:
    ext_root = tmp / "extensions"
    (ext_root / "stamp").mkdir(parents=True)
    (ext_root / "stamp" / "main.py").write_text(STAMPING_CHANNEL)
    (ext_root / "stamp" / "manifest.yaml").write_text(
        "id: stamp\nname: Stamp\nentrypoint: main:Ext\n"
    )
    (ext_root / "scheduler").symlink_to(ROOT / "sandbox" / "extensions" / "scheduler")
    settings = {
        "paths": {"extensions": str(ext_root), "data": str(tmp / "data")},
        "isolation": {"default": "inprocess"},  # its extensions run in the kernel (ADR 0086)
        "models": {"default": None},
        "channels": {"default": "stamp"},
        "logging": {"level": "WARNING"},
    }
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def _noise(kernel: Kernel, start: float, handled: list[float]) -> None:
    async def handler(event: Any) -> None:
        handled.append(time.time())

    kernel.bus.subscribe("bench.noise", handler, "bench.noise-subscriber", concurrency=4)
    moments = sorted(random.uniform(0, WINDOW_S) for _ in range(OTHER_EVENTS))
    for n, moment in enumerate(moments):
        delay = start + moment - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await kernel.bus.publish("bench.noise", "bench", {"n": n, "pad": "x" * 200})


async def _run(settings_path: Path) -> dict[str, Any]:
    kernel = Kernel(load_settings(settings_path))
    serving = asyncio.create_task(kernel.run())
    while not kernel.ready.is_set():
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    try:
        extension = kernel.loader.instance("scheduler")
        scheduler = extension.scheduler
        package = type(extension).__module__.rsplit(".", 1)[0]  # as the loader imported it
        Timing = importlib.import_module(f"{package}.model").Timing
        start, base = time.monotonic(), datetime.now(UTC)
        due: dict[str, float] = {}
        step = (WINDOW_S - FIRST_DUE_S) / (REMINDERS - 1)
        for n in range(REMINDERS):
            at = base + timedelta(seconds=FIRST_DUE_S + n * step)
            schedule = await scheduler.add(Timing.once(at), f"r{n}")
            due[schedule.text] = schedule.next_due.timestamp()
        handled: list[float] = []
        noise = asyncio.create_task(_noise(kernel, start, handled))
        channel = kernel.loader.instance("stamp")
        deadline = time.monotonic() + WINDOW_S + 15
        while len(channel.received) < REMINDERS and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await noise
        await asyncio.sleep(0.5)  # room for duplicates to show up
    finally:
        kernel.request_shutdown()
        await serving
    texts = [text for _, text in channel.received]
    lateness = sorted((at - due[text]) * 1000 for at, text in channel.received if text in due)
    q = statistics.quantiles(lateness, n=100, method="inclusive") if len(lateness) > 1 else [0] * 99
    return {
        "benchmark": "reminders",
        "reminders": REMINDERS,
        "other_events": OTHER_EVENTS,
        "window_s": WINDOW_S,
        "delivered": len(lateness),
        "duplicates": len(texts) - len(set(texts)),
        "other_events_handled": len(handled),
        "lateness_ms": {
            "min": round(lateness[0], 2),
            "p50": round(statistics.median(lateness), 2),
            "p99": round(q[98], 2),
            "max": round(lateness[-1], 2),
        },
        "targets_met": statistics.median(lateness) < 100 and q[98] < 1000,
        "cpu_count": os.cpu_count(),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hearth-bench-reminders-") as tmp:
        result = asyncio.run(_run(_setup(Path(tmp))))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
