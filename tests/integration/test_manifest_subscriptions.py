"""Issue 28 item 9 (ADR 0044): a manifest's ``events.subscribes`` gets the checks
the same act gets from code — ``permissions.subscribe`` for the topic,
``permissions.notify`` and the notification rate limit for ``notify_user`` —
in process and isolated. A subscription that asks for more is a load error
naming the manifest and the entry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

MODES = ["inprocess", "process"]


def notifications(kernel: Any) -> list[str]:
    return [text for kind, _, text in kernel.loader.instance("capture")._log() if kind == "notify"]


def subscribes(topic: str) -> dict[str, Any]:
    return {"events": {"subscribes": [{"topic": topic, "handler": "notify_user"}]}}


async def settled(kernel: Any) -> None:
    """Every delivery in the journal handled (none pending or in flight)."""
    for _ in range(1500):
        counts = await kernel.bus.journal.counts()
        if not counts.get("pending") and not counts.get("inflight"):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"deliveries not settled: {counts}")


async def flood(kernel: Any, topic: str, n: int = 60) -> None:
    for i in range(n):
        await kernel.bus.publish(topic, "test", {"text": f"buy now {i}"})


@pytest.mark.parametrize("isolation", MODES)
async def test_notify_user_subscription_without_notify_permission_is_refused(
    make_ext, settings_file, isolation
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "chatty",
        ext_code(),
        {"isolation": isolation, "permissions": {"notify": False}, **subscribes("chatty.alert")},
    )
    make_ext("good", ext_code(), {"isolation": isolation, **subscribes("good.alert")})
    async with running_kernel(settings_file(channels={"default": "capture"})) as kernel:
        record = kernel.loader.records["chatty"]
        assert record.status.value == "error"
        assert "chatty/manifest.yaml: events.subscribes.0.handler: notify_user needs " in (
            record.error or ""
        )
        await flood(kernel, "chatty.alert")
        await kernel.bus.publish("good.alert", "test", {"text": "the laundry is done"})
        await wait_for(lambda: notifications(kernel))
        await settled(kernel)
        assert notifications(kernel) == ["the laundry is done"]


@pytest.mark.parametrize("isolation", MODES)
async def test_a_subscription_outside_permissions_subscribe_is_refused(
    make_ext, settings_file, isolation
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "snoop",
        ext_code(),
        {
            "isolation": isolation,
            "permissions": {"subscribe": ["snoop.*"]},
            **subscribes("bank.statement"),
        },
    )
    async with running_kernel(settings_file(channels={"default": "capture"})) as kernel:
        record = kernel.loader.records["snoop"]
        assert record.status.value == "error"
        assert (
            "snoop/manifest.yaml: events.subscribes.0.topic: 'bank.statement' is outside "
            "permissions.subscribe (snoop.*)" in (record.error or "")
        )
        await kernel.bus.publish("bank.statement", "test", {"text": "balance: 1,234"})
        await settled(kernel)
        assert notifications(kernel) == []


@pytest.mark.parametrize("isolation", MODES)
async def test_notify_user_subscription_spends_the_rate_limit(make_ext, settings_file, isolation):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("loud", ext_code(), {"isolation": isolation, **subscribes("loud.alert")})
    path = settings_file(
        channels={"default": "capture"},
        rate_limits={"notify_burst": 3, "notify_per_minute": 0.001},
    )
    async with running_kernel(path) as kernel:
        assert kernel.loader.records["loud"].status.value == "active"
        await flood(kernel, "loud.alert")
        await wait_for(lambda: len(notifications(kernel)) >= 3)
        await settled(kernel)
        assert notifications(kernel) == ["buy now 0", "buy now 1", "buy now 2"]
        dead = await kernel.bus.journal.dead_letters()
        assert dead == []  # refused notifications are dropped, not retried into dead letters
