"""Telegram chats and reply targets (issue 11 item 8, ADR 0017), through a whole
kernel over real HTTP to the fake Bot API: groups are opt-in per chat id, a
conversation is a chat, and reminders and notifications reach the user (and
chat) they belong to — never "the last chat seen"."""

from __future__ import annotations

import logging

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from support.fake_telegram import FakeTelegram
from support.harness import running_kernel, wait_for
from support.telegram_support import ALICE, EXTENSION_ID, MALLORY, install_extension, write_settings

BOB = 43  # a second allowed user
GROUP = -1001  # a group chat both are in


@pytest.fixture
def tg(monkeypatch):
    with FakeTelegram() as server:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", server.token)
        yield server


@pytest.fixture(autouse=True)
def _extension(ext_root):
    install_extension(ext_root)


def reply_model(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(t)] for t in texts])


async def test_a_group_that_is_not_opted_in_is_ignored_and_logged_once(tg, settings_file, caplog):
    caplog.set_level(logging.WARNING, logger=f"ext.{EXTENSION_ID}")
    model = reply_model("private answer")
    async with running_kernel(write_settings(settings_file, tg), model=model) as kernel:
        tg.send_update("hello group", user_id=ALICE, chat_id=GROUP)
        tg.send_update("/remind 1s tea", user_id=ALICE, chat_id=GROUP)
        tg.send_update("hi", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["private answer"])
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
    assert [e.payload["text"] for e in events] == ["hi"]
    assert tg.messages(GROUP) == []
    assert len(model.calls) == 1 and "hello group" not in str(model.calls[0].input)
    refusals = [
        r.message for r in caplog.records if f"ignoring Telegram group {GROUP}" in r.message
    ]
    assert len(refusals) == 1 and "allowed_group_chat_ids" in refusals[0]


async def test_an_opted_in_group_is_its_own_conversation_and_private_replies_stay_private(
    tg, settings_file
):
    model = reply_model("noted, Alice", "answer in the group", "answer in private")
    settings = write_settings(settings_file, tg, allowed_group_chat_ids=[GROUP])
    async with running_kernel(settings, model=model) as kernel:
        tg.send_update("my secret word is marmalade", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["noted, Alice"])
        tg.send_update("what is my secret word?", user_id=ALICE, chat_id=GROUP)
        await wait_for(lambda: tg.chat_texts(GROUP) == ["answer in the group"])
        tg.send_update("let me in", user_id=MALLORY, chat_id=GROUP)  # not an allowed user
        tg.send_update("/help@other_bot", user_id=ALICE, chat_id=GROUP)  # another bot's
        tg.send_update("and here?", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["noted, Alice", "answer in private"])
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
    group_turn, private_turn = str(model.calls[1].input), str(model.calls[2].input)
    assert "what is my secret word?" in group_turn
    assert "marmalade" not in group_turn  # the group does not share the private history
    assert "marmalade" in private_turn and "what is my secret word?" not in private_turn
    assert tg.chat_texts(GROUP) == ["answer in the group"]  # nothing else went there
    assert sorted(e.payload["user_id"] for e in events) == sorted(
        [str(ALICE), str(GROUP), str(ALICE)]
    )
    model.assert_complete()


async def test_two_users_each_get_their_reminder_in_the_chat_they_set_it_from(
    tg, settings_file, ext_root
):
    install_extension(ext_root, "scheduler")
    settings = write_settings(
        settings_file, tg, allowed=(ALICE, BOB), allowed_group_chat_ids=[GROUP], default_chat_id=777
    )
    async with running_kernel(settings, model=reply_model()):
        tg.send_update("/remind 2s alice tea", user_id=ALICE)
        tg.send_update("/remind 2s bob stretch", user_id=BOB)
        tg.send_update("/remind 2s group standup", user_id=BOB, chat_id=GROUP)
        tg.send_update("/status", user_id=ALICE, chat_id=GROUP)  # Alice writes in the group last
        await wait_for(
            lambda: (
                len(tg.chat_texts(ALICE)) == 2
                and len(tg.chat_texts(BOB)) == 2
                and len(tg.chat_texts(GROUP)) == 3
            ),
            timeout=20,
        )
    assert "alice tea" in tg.chat_texts(ALICE)[1]
    assert "bob stretch" in tg.chat_texts(BOB)[1]
    assert "group standup" in tg.chat_texts(GROUP)[-1]
    assert tg.messages(777) == []  # not default_chat_id


async def test_a_reminder_set_by_the_assistant_goes_to_the_user_who_asked(
    tg, settings_file, ext_root
):
    install_extension(ext_root, "scheduler")
    model = ScriptedModel(
        [
            [
                function_call(
                    "schedule_once", {"text": "water the plants", "delay": "2s"}, call_id="c1"
                )
            ],
            [assistant_message("I will remind you.")],
        ]
    )
    settings = write_settings(settings_file, tg, allowed=(ALICE, BOB), default_chat_id=ALICE)
    async with running_kernel(settings, model=model):
        tg.send_update("set a reminder in 2 seconds: water the plants", user_id=BOB)
        await wait_for(lambda: len(tg.chat_texts(BOB)) == 2, timeout=20)
    assert tg.chat_texts(BOB) == ["I will remind you.", "⏰ Reminder: water the plants"]
    assert tg.messages(ALICE) == []
    model.assert_complete()


async def test_a_notification_without_a_target_goes_to_default_chat_or_first_allowed_user(
    tg, settings_file
):
    async with running_kernel(write_settings(settings_file, tg, default_chat_id=777)) as kernel:
        assert kernel.router is not None
        await kernel.router.notify_user("tea time", EXTENSION_ID)
        await wait_for(lambda: tg.chat_texts(777) == ["tea time"])
    settings = write_settings(
        settings_file, tg, allowed=(BOB, ALICE), allowed_group_chat_ids=[GROUP]
    )
    async with running_kernel(settings, model=reply_model("hi")) as kernel:
        tg.send_update("hello", user_id=ALICE, chat_id=GROUP)
        await wait_for(lambda: tg.chat_texts(GROUP) == ["hi"])
        assert kernel.router is not None
        await kernel.router.notify_user("reminder!", EXTENSION_ID)
        await wait_for(lambda: tg.chat_texts(BOB) == ["reminder!"])
        await kernel.router.notify_user("for alice", EXTENSION_ID, user_id=str(ALICE))
        await wait_for(lambda: tg.chat_texts(ALICE) == ["for alice"])
    assert tg.chat_texts(GROUP) == ["hi"]  # not the last chat seen


async def test_the_channel_never_writes_to_a_chat_it_does_not_serve(tg, settings_file, caplog):
    async with running_kernel(write_settings(settings_file, tg)) as kernel:
        channel = kernel.loader.instance(EXTENSION_ID)
        with pytest.raises(ValueError, match="allowed_group_chat_ids"):
            await channel.send_to_user(str(GROUP), "leak")
        with pytest.raises(ValueError, match="not a Telegram chat id"):
            await channel.send_to_user("alice", "leak")
    assert tg.calls_of("sendMessage") == []


async def test_a_positive_group_id_is_a_config_error_naming_the_key(tg, settings_file):
    settings = write_settings(settings_file, tg, allowed_group_chat_ids=[ALICE])
    async with running_kernel(settings) as kernel:
        record = kernel.loader.records[EXTENSION_ID]
    assert record.status.value == "error"
    assert "allowed_group_chat_ids" in (record.error or "") and str(ALICE) in (record.error or "")
