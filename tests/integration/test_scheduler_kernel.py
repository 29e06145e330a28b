"""Reminders through a whole kernel: commands, tools, delivery as proactive
messages on the channel they were set from, and manifest schedules."""

from __future__ import annotations

import asyncio
import time

from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for
from support.scheduler_helpers import install_scheduler, notified, replied

TICKER = ext_code(
    """
    runs = 0
    async def execute_task(self, task_name):
        type(self).runs += 1
        return {"text": f"{task_name} ran"}
    """
)


async def test_remind_command_is_delivered_as_a_proactive_message(
    ext_root, make_ext, settings_file, storage_backend
):
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("other", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([])  # a reminder must never become a turn for the model
    path = settings_file(channels={"default": "other"}, storage=storage_backend)
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("capture")
        started = time.monotonic()
        await channel.say("/remind 1s stretch your legs")
        await wait_for(lambda: replied(k))
        assert replied(k)[0].startswith("Reminder #1 set for today ")
        await wait_for(lambda: len(replied(k)) == 2, timeout=5)
        took = time.monotonic() - started
        await asyncio.sleep(0.3)
    assert 0.8 <= took < 3
    # once, to the user and on the channel it was set from (ADR 0017)
    assert k.loader.instance("capture")._log()[-1] == (
        "reply",
        "u1",
        "⏰ Reminder: stretch your legs",
    )
    assert replied(k)[1:] == ["⏰ Reminder: stretch your legs"]
    assert notified(k) == [] and notified(k, "other") == []
    assert not model.calls


async def test_reminders_lists_and_cancel_removes(ext_root, make_ext, settings_file):
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, timezone="America/New_York")
    async with running_kernel(path) as k:
        # `timezone: null` in the manifest config means the kernel's timezone setting
        assert k.loader.instance("scheduler").scheduler.timezone == "America/New_York"
        channel = k.loader.instance("capture")
        commands = [
            "/remind 2h tea",
            '/remind "0 9 * * 1-5" plan',
            "/remind 10x oops",
            "/reminders",
            "/cancel 1",
            "/reminders",
            "/cancel abc",
        ]
        for n, text in enumerate(commands, start=1):  # commands run concurrently: one at a time
            await channel.say(text)
            await wait_for(lambda n=n: len(replied(k)) == n)
    answers = replied(k)
    assert answers[1].startswith("Reminder #2 set (every weekday 09:00), first ")
    assert answers[2].startswith('can\'t read "10x" as a time; try')
    # listed by next fire time: which comes first depends on the hour the test runs
    listing = sorted(answers[3].splitlines())
    assert len(listing) == 2 and listing[0].startswith("#1  ") and "tea" in listing[0]
    assert listing[1].startswith("#2  ") and "(every weekday 09:00)  plan" in listing[1]
    assert answers[4] == "Cancelled reminder #1: tea"
    assert answers[5].startswith("#2 ") and "tea" not in answers[5]
    assert answers[6] == 'can\'t read "abc" as a reminder id; /reminders lists them'


async def test_tool_schedule_reaches_the_channel_of_the_turn(ext_root, make_ext, settings_file):
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("other", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel(
        [
            [function_call("schedule_once", {"text": "stretch", "delay": "1s"}, call_id="c1")],
            [assistant_message("I'll remind you.")],
        ]
    )
    # the model's tool, not the sentence the scheduler answers itself (test_local_first.py)
    path = settings_file(
        channels={"default": "other"}, extensions={"scheduler": {"local_first": False}}
    )
    async with running_kernel(path, model=model) as k:
        await k.loader.instance("capture").say("remind me in a second to stretch")
        await wait_for(lambda: len(replied(k)) == 2, timeout=5)
    assert k.loader.instance("capture")._log() == [
        ("reply", "u1", "I'll remind you."),
        ("reply", "u1", "⏰ Reminder: stretch"),  # to the user of the turn that set it
    ]
    assert notified(k) == [] and notified(k, "other") == []
    assert "scheduled #1  today" in str(model.calls[1].input)
    model.assert_complete()


async def test_manifest_schedule_calls_execute_task_and_notifies(
    make_ext, settings_file, storage_backend
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext(
        "ticker",
        TICKER,
        {"schedules": [{"name": "tick", "cron": "* * * * * *", "task": "digest"}]},
    )
    path = settings_file(channels={"default": "capture"}, storage=storage_backend)
    async with running_kernel(path) as k:
        await wait_for(lambda: notified(k), timeout=5)
        fired = await k.scheduler.state.last_due("ticker:tick")
    assert notified(k)[0] == "digest ran"
    assert fired is not None  # the fire was recorded (schedules.db, or PostgreSQL)
    assert (k.data_dir / "schedules.db").is_file() == (storage_backend["backend"] == "sqlite")


PINGER = ext_code(
    """
    got = None
    async def start(self):
        self.got = []
        self.ctx.subscribe_event("pinger.ping", self.on_ping)
        await self.ctx.get_extension("scheduler").schedule("1s", "ping", topic="pinger.ping")
    async def on_ping(self, event):
        self.got.append(event.payload)
    """
)


async def test_another_extension_gets_fires_on_its_own_topic(ext_root, make_ext, settings_file):
    install_scheduler(ext_root)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("pinger", PINGER, {"depends_on": ["scheduler"]})
    async with running_kernel(settings_file(channels={"default": "capture"})) as k:
        pinger = k.loader.instance("pinger")
        await wait_for(lambda: pinger.got, timeout=5)
    [payload] = pinger.got
    assert payload["text"] == "ping" and payload["late"] is False
    assert notified(k) == []  # not a reminder.due: nothing for the user
