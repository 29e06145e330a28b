"""The Telegram channel through a whole kernel, over real HTTP to a fake Bot API:
allow-list, replies, splitting, markup, commands (chats and reply targets:
test_telegram_groups.py)."""

from __future__ import annotations

import logging

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.fake_telegram import FakeTelegram
from support.harness import running_kernel, wait_for
from support.telegram_support import (
    ALICE,
    EXTENSION_ID,
    MALLORY,
    install_extension,
    telegram_config,
    write_settings,
)


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


async def test_allowed_user_gets_a_reply_in_their_chat(tg, settings_file):
    model = reply_model("Hello Alice!")
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("hi there", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["Hello Alice!"])
    assert "hi there" in str(model.calls[0].input)
    model.assert_complete()


async def test_reply_goes_to_the_group_chat_the_user_wrote_from(tg, settings_file):
    model = reply_model("Hi group")
    settings = write_settings(settings_file, tg, allowed_group_chat_ids=[-1001])
    async with running_kernel(settings, model=model):
        tg.send_update("hello", user_id=ALICE, chat_id=-1001)
        await wait_for(lambda: tg.chat_texts(-1001) == ["Hi group"])
    assert tg.chat_texts(ALICE) == []


async def test_other_users_are_ignored_logged_once_and_never_reach_the_model(
    tg, settings_file, caplog
):
    caplog.set_level(logging.WARNING, logger=f"ext.{EXTENSION_ID}")
    model = reply_model("for alice")
    async with running_kernel(write_settings(settings_file, tg), model=model) as kernel:
        tg.send_update("let me in", user_id=MALLORY)
        tg.send_update("please", user_id=MALLORY)
        tg.send_update("hello", user_id=ALICE)
        await wait_for(lambda: tg.chat_texts(ALICE) == ["for alice"])
        await wait_for(lambda: tg.messages(MALLORY))
        events = await kernel.bus.journal.recent_events(50, topic="user.message")
    assert [e.payload["text"] for e in events] == ["hello"]
    # a stranger gets one pairing code (SPEC §11, docs/people.md) and nothing else
    assert [m.text.split(" /pair ")[0] for m in tg.messages(MALLORY)] == [
        "Hearth does not know you yet. Ask its owner to send"
    ]
    assert len(model.calls) == 1 and "let me in" not in str(model.calls[0].input)
    refusals = [r for r in caplog.records if f"ignoring Telegram user {MALLORY}" in r.message]
    assert len(refusals) == 1
    assert "allowed_user_ids" in refusals[0].message


async def test_empty_allow_list_serves_nobody_and_says_how_to_find_your_id(
    tg, settings_file, caplog
):
    caplog.set_level(logging.INFO, logger=f"ext.{EXTENSION_ID}")
    model = reply_model()
    async with running_kernel(write_settings(settings_file, tg, allowed=()), model=model):
        tg.send_update("/start", user_id=ALICE)
        await wait_for(lambda: any(f"user {ALICE}" in r.message for r in caplog.records))
        await wait_for(lambda: tg.messages(ALICE))
    startup = [r.message for r in caplog.records if "allowed_user_ids is empty" in r.message]
    assert startup and "/start" in startup[0]
    assert model.calls == ()  # only a pairing code answers
    assert [m.text.split(" /pair ")[0] for m in tg.messages(ALICE)] == [
        "Hearth does not know you yet. Ask its owner to send"
    ]


async def test_long_reply_is_split_at_paragraphs_within_4096_characters(tg, settings_file):
    paragraphs = [f"Paragraph {i}:" + " lorem ipsum" * 60 for i in range(14)]
    text = "\n\n".join(paragraphs)
    assert len(text) > 2 * 4096
    async with running_kernel(write_settings(settings_file, tg), model=reply_model(text)):
        tg.send_update("tell me a lot", user_id=ALICE)
        await wait_for(lambda: len(tg.chat_texts(ALICE)) >= 3)
    pieces = tg.chat_texts(ALICE)
    assert len(pieces) == 3
    assert all(len(p) <= 4096 for p in pieces)
    assert all(p.startswith("Paragraph") for p in pieces)  # cut at paragraph boundaries
    assert "\n\n".join(pieces) == text


async def test_markdown_is_rendered_as_html_and_falls_back_to_plain_text(tg, settings_file):
    model = reply_model("**Tea** is `ready` & hot", "**Tea** again")
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("tea?", user_id=ALICE)
        await wait_for(lambda: len(tg.messages(ALICE)) == 1)
        tg.reject_markup = True
        tg.send_update("again?", user_id=ALICE)
        await wait_for(lambda: len(tg.messages(ALICE)) == 2)
    rich, plain = tg.messages(ALICE)
    assert (rich.parse_mode, rich.text) == ("HTML", "<b>Tea</b> is <code>ready</code> &amp; hot")
    assert (plain.parse_mode, plain.text) == (None, "**Tea** again")


async def test_commands_work_without_the_model_and_are_registered(tg, settings_file):
    model = reply_model()
    async with running_kernel(write_settings(settings_file, tg), model=model) as kernel:
        await wait_for(lambda: tg.calls_of("setMyCommands"))
        kernel_commands = {name for name, _ in kernel.commands.names_and_descriptions()}
        tg.send_update("/help", user_id=ALICE)
        tg.send_update("/start", user_id=ALICE)
        await wait_for(lambda: len(tg.chat_texts(ALICE)) == 2)
    help_text, start_text = tg.chat_texts(ALICE)
    assert "/help" in help_text and "/status" in help_text and start_text == help_text
    registered = tg.calls_of("setMyCommands")[0].params["commands"]
    names = {c["command"] for c in registered}
    assert names == kernel_commands  # the menu is the kernel's own command list
    assert {"help", "new", "status"} <= names
    assert model.calls == ()


async def test_remind_is_delivered_to_the_chat_it_was_set_from(tg, settings_file, ext_root):
    install_extension(ext_root, "scheduler")
    model = reply_model()
    settings = write_settings(settings_file, tg, allowed_group_chat_ids=[-321])
    async with running_kernel(settings, model=model):
        tg.send_update("/remind 2s stretch your legs", user_id=ALICE, chat_id=-321)
        await wait_for(lambda: len(tg.chat_texts(-321)) == 1)
        set_at = tg.calls_of("sendMessage")[-1].at
        await wait_for(lambda: len(tg.chat_texts(-321)) == 2, timeout=15)
        fired_at = tg.calls_of("sendMessage")[-1].at
    confirmation, reminder = tg.chat_texts(-321)
    assert confirmation.startswith("Reminder #1 set for ")
    assert reminder == "⏰ Reminder: stretch your legs"  # a reminder, not a reply
    assert 1.0 <= fired_at - set_at <= 6.0
    assert model.calls == ()


async def test_reminder_format_is_the_scheduler_setting(tg, settings_file, ext_root):
    install_extension(ext_root, "scheduler")
    settings = settings_file(
        channels={"default": EXTENSION_ID},
        extensions={
            EXTENSION_ID: telegram_config(tg),
            "scheduler": {"reminder_format": "🔔 {text} — from Hearth{late}"},
        },
    )
    async with running_kernel(settings, model=reply_model()):
        tg.send_update("/remind tomorrow 9am call mom", user_id=ALICE)
        tg.send_update("/remind 1s tea", user_id=ALICE)
        await wait_for(lambda: len(tg.chat_texts(ALICE)) == 3, timeout=15)
    confirmation = next(t for t in tg.chat_texts(ALICE) if "call mom" in t)
    assert confirmation.startswith("Reminder #1 set for tomorrow 09:00")
    assert tg.chat_texts(ALICE)[-1] == "🔔 tea — from Hearth"
