"""Typed system-topic payloads (issue 12 item 7): a misspelled key fails loudly at
publish, a payload that slipped into the journal some other way is logged once and
dropped, and the journaled JSON keeps its public shape and round-trips."""

from __future__ import annotations

import logging
import time

import pytest
from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from core.events import (
    AgentBackground,
    AgentTask,
    SQLiteJournal,
    SystemPayloadError,
    SystemTopics,
    UserMessage,
    UserNotify,
)
from core.events.journal import NewEvent, WriteBatch
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

# An extension that may publish straight to the notify topic, and misspells a key.
TYPO_NOTIFIER = ext_code(
    """
    async def notify_with_typo(self):
        await self.ctx.emit("system.user.notify", {"txt": "tea is ready"})
    """
)


def replies(kernel) -> list[tuple[str, str | None, str]]:
    return kernel.loader.instance("capture")._log()


async def test_a_misspelled_key_is_refused_at_publish_naming_topic_and_key(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("typo", TYPO_NOTIFIER, manifest={"permissions": {"emit": ["system.user.notify"]}})
    model = ScriptedModel([[assistant_message("Still answering.")]])
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        with pytest.raises(SystemPayloadError) as err:
            await k.loader.instance("typo").notify_with_typo()
        with pytest.raises(SystemPayloadError, match="key 'text' must be a string, got int"):
            await k.bus.publish(SystemTopics.USER_NOTIFY, "test", {"text": 3})
        journaled = await k.bus.journal.recent_events(10, topic=SystemTopics.USER_NOTIFY)
        await k.loader.instance("capture").say("are you there?")
        await wait_for(lambda: replies(k))
    message = str(err.value)
    assert "'system.user.notify'" in message and "key 'txt' is unknown" in message
    assert "known keys: text, channel_id, user_id" in message
    assert journaled == []  # nothing was stored
    assert replies(k) == [("reply", "u1", "Still answering.")]  # the router still answers


async def test_an_invalid_journaled_payload_is_logged_once_and_dropped(
    make_ext, settings_file, tmp_path, caplog
):
    """An event written by another process (say an older kernel) bypassed the check."""
    caplog.set_level(logging.INFO)
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("Hello again.")]])
    path = settings_file(channels={"default": "capture"}, events={"poll_interval_s": 0.05})
    async with running_kernel(path, model=model) as k:
        other = SQLiteJournal(tmp_path / "data" / "events.db")
        await other.open()
        try:
            now = time.time()
            payload = '{"txt":"hi","user_id":"u1","channel_id":"capture"}'
            event = NewEvent(SystemTopics.USER_MESSAGE, "old-kernel", payload, None, None, now)
            await other.commit(WriteBatch(now=now, events=[event]))
        finally:
            await other.close()

        def dropped() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "dropping event" in r.getMessage()]

        await wait_for(dropped)
        await k.loader.instance("capture").say("hello?")
        await wait_for(lambda: replies(k))
    (line,) = dropped()
    assert line.levelno == logging.ERROR
    text = line.getMessage()
    assert "kernel.router" in text and "'user.message' from 'old-kernel'" in text
    assert "key 'txt' is unknown" in text
    assert replies(k) == [("reply", "u1", "Hello again.")]
    assert len(model.calls) == 1  # the bad event never reached the model


async def test_journaled_payloads_keep_their_shape_and_round_trip(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    model = ScriptedModel([[assistant_message("ok")]])
    async with running_kernel(settings_file(channels={"default": "capture"}), model=model) as k:
        channel = k.loader.instance("capture")
        await channel.ctx.on_user_message("hi", "u7", message_id="m1")
        await channel.ctx.notify_user("ding")
        await wait_for(lambda: len(replies(k)) == 2)
        (message,) = await k.bus.journal.recent_events(5, topic=SystemTopics.USER_MESSAGE)
        (notice,) = await k.bus.journal.recent_events(5, topic=SystemTopics.USER_NOTIFY)
    assert message.payload == {
        "text": "hi",
        "user_id": "u7",
        "channel_id": "capture",
        "message_id": "m1",
    }
    assert notice.payload == {"text": "ding", "channel_id": None}
    assert UserMessage.from_payload(message.payload) == UserMessage(
        text="hi", user_id="u7", channel_id="capture", message_id="m1"
    )
    assert UserNotify.from_payload(notice.payload) == UserNotify(text="ding")
    for model_obj in (
        UserNotify(text="ding", channel_id="telegram", user_id="42"),
        AgentTask(prompt="summarise my day", channel_id="telegram"),
        AgentBackground(prompt="tidy up", correlation_id="c-1"),
    ):
        assert type(model_obj).from_payload(model_obj.to_payload()) == model_obj


def test_models_refuse_missing_and_mistyped_fields():
    with pytest.raises(SystemPayloadError, match="'user.message': key 'channel_id' is required"):
        UserMessage.from_payload({"text": "hi", "user_id": "u1"})
    with pytest.raises(SystemPayloadError, match="key 'prompt' must be a string, got NoneType"):
        AgentTask(prompt=None)  # type: ignore[arg-type]
    with pytest.raises(SystemPayloadError, match="key 'user_id' must be a string or null"):
        UserNotify.from_payload({"text": "x", "user_id": 42})
    with pytest.raises(SystemPayloadError, match="key 'text' must be a string, got bool"):
        UserNotify.from_payload({"text": True})  # no coercion, not even of a bool
    with pytest.raises(SystemPayloadError, match="key '1' is not a text key"):
        UserNotify.from_payload({"text": "x", 1: "y"})
    with pytest.raises(SystemPayloadError, match="key 'txt' is unknown"):
        UserNotify(text="x", txt="y")  # type: ignore[call-arg]
    loose = AgentTask.from_payload({"prompt": "p", "extra": 1}, strict=False)
    assert loose == AgentTask(prompt="p") and loose.to_payload() == {
        "prompt": "p",
        "channel_id": None,
    }
