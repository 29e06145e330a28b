"""Consent on Telegram (ADR 0021), through a whole kernel over real HTTP to the
fake Bot API: a question comes with an inline keyboard (Allow once / Always
allow / Deny); the owner's press answers it and the message is edited to say
how it ended; a press from a user who is not allow-listed, or from another
allowed member of a group chat, changes nothing — and neither does that
member typing ``/approve``."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from support.fake_telegram import FakeTelegram
from support.harness import running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.telegram_support import ALICE, MALLORY, install_extension, write_settings

BOB = 43  # allowed too
GROUP = -1001


@pytest.fixture
def tg(monkeypatch):
    with FakeTelegram() as server:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", server.token)
        yield server


@pytest.fixture
def kernel_for(ext_root, make_ext, settings_file, tg):
    install_extension(ext_root)
    make_ext("rockets", ROCKETS)

    def start(model: ScriptedModel):
        settings = write_settings(
            settings_file,
            tg,
            allowed=(ALICE, BOB),
            allowed_group_chat_ids=[GROUP],
            sections={"policy": {"profile": "safe"}},
        )
        return running_kernel(settings, model=model)

    return start


def launch_model(reply: str) -> ScriptedModel:
    return ScriptedModel(
        [[function_call("launch", {"target": "moon"}, call_id="c1")], [assistant_message(reply)]]
    )


def question(tg: FakeTelegram, chat_id: int):
    found = [m for m in tg.messages(chat_id) if m.buttons]
    return found[0] if found else None


def launched(kernel) -> list[str]:
    return kernel.loader.instance("rockets").log()


async def test_the_owners_press_allows_once_and_the_question_shows_the_outcome(tg, kernel_for):
    async with kernel_for(launch_model("Launched at the moon.")) as kernel:
        tg.send_update("launch at the moon", user_id=ALICE)
        asked = await wait_for(lambda: question(tg, ALICE))
        assert asked.text == 'Allow launch(target="moon")?'
        labels = [label for label, _ in asked.buttons]
        assert labels == ["Allow once", "Always allow", "Deny"]
        assert launched(kernel) == []
        tg.press(ALICE, asked.message_id, asked.buttons[0][1], user_id=ALICE)
        await wait_for(lambda: "Launched at the moon." in tg.chat_texts(ALICE))
        assert launched(kernel) == ["moon"]
        await wait_for(lambda: not asked.buttons)  # the keyboard is gone
    assert asked.text == 'Allow launch(target="moon")?\nAllowed once: launch(target="moon")'
    assert len(tg.calls_of("answerCallbackQuery")) == 1


async def test_deny_by_button_reaches_the_model(tg, kernel_for):
    model = launch_model("Not launched.")
    async with kernel_for(model) as kernel:
        tg.send_update("launch at the moon", user_id=ALICE)
        asked = await wait_for(lambda: question(tg, ALICE))
        tg.press(ALICE, asked.message_id, asked.buttons[2][1], user_id=ALICE)
        await wait_for(lambda: "Not launched." in tg.chat_texts(ALICE))
        assert launched(kernel) == []
    assert asked.text.endswith('Denied: launch(target="moon")')
    outputs = [i for i in model.calls[-1].input if isinstance(i, dict) and "output" in i]
    assert outputs[-1]["output"] == "not run: the user denied launch."


async def test_presses_from_strangers_and_other_group_members_change_nothing(tg, kernel_for):
    async with kernel_for(launch_model("Launched from the group.")) as kernel:
        tg.send_update("launch at the moon", user_id=ALICE, chat_id=GROUP)
        asked = await wait_for(lambda: question(tg, GROUP))
        allow = asked.buttons[0][1]
        tg.press(GROUP, asked.message_id, allow, user_id=MALLORY)  # not allow-listed
        tg.press(GROUP, asked.message_id, allow, user_id=BOB)  # allowed, not the owner
        tg.send_update(f"/approve {allow.split(':')[0]}", user_id=BOB, chat_id=GROUP)
        await wait_for(lambda: len(tg.calls_of("answerCallbackQuery")) == 2)
        await wait_for(
            lambda: any("Only the person who was asked" in t for t in tg.chat_texts(GROUP))
        )
        assert launched(kernel) == [] and asked.buttons  # still open
        notes = [c.params.get("text") for c in tg.calls_of("answerCallbackQuery")]
        assert notes == [
            "You are not allowed to use this bot.",
            "Only the person who asked can answer this.",
        ]
        tg.press(GROUP, asked.message_id, allow, user_id=ALICE)  # the owner
        await wait_for(lambda: "Launched from the group." in tg.chat_texts(GROUP))
        assert launched(kernel) == ["moon"]
        answers = await kernel.bus.journal.recent_events(20, topic="system.ui.answer")
    assert [e.payload["sender_id"] for e in answers] == [str(ALICE)]  # only hers was journaled


async def test_always_allow_by_button_stops_asking(tg, kernel_for):
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("One.")],
            [function_call("launch", {"target": "mars"}, call_id="c2")],
            [assistant_message("Two.")],
        ]
    )
    async with kernel_for(model) as kernel:
        tg.send_update("launch at the moon", user_id=ALICE)
        asked = await wait_for(lambda: question(tg, ALICE))
        tg.press(ALICE, asked.message_id, asked.buttons[1][1], user_id=ALICE)
        await wait_for(lambda: "One." in tg.chat_texts(ALICE))
        tg.send_update("and mars", user_id=ALICE)
        await wait_for(lambda: "Two." in tg.chat_texts(ALICE))
        assert launched(kernel) == ["moon", "mars"]
    assert len([m for m in tg.messages(ALICE) if "Allow launch" in m.text]) == 1


async def test_another_members_message_in_a_group_leaves_the_question_open(tg, kernel_for):
    """Only the person asked supersedes their question: Bob writing in the group gets
    his own answer while Alice's approval stays open, and her press still allows it;
    her own new message then denies her next question, as before."""
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Hello Bob.")],
            [assistant_message("Launched from the group.")],
            [function_call("launch", {"target": "mars"}, call_id="c2")],
            [assistant_message("Mars not launched.")],
            [assistant_message("Something else, then.")],
        ]
    )
    async with kernel_for(model) as kernel:
        tg.send_update("launch at the moon", user_id=ALICE, chat_id=GROUP)
        asked = await wait_for(lambda: question(tg, GROUP))
        tg.send_update("hello everyone", user_id=BOB, chat_id=GROUP)
        await wait_for(lambda: "Hello Bob." in tg.chat_texts(GROUP))
        assert asked.buttons and launched(kernel) == []  # Alice's question is still open
        tg.press(GROUP, asked.message_id, asked.buttons[0][1], user_id=ALICE)
        await wait_for(lambda: "Launched from the group." in tg.chat_texts(GROUP))
        assert launched(kernel) == ["moon"]

        tg.send_update("launch at mars", user_id=ALICE, chat_id=GROUP)
        mars = await wait_for(lambda: question(tg, GROUP))
        tg.send_update("never mind", user_id=ALICE, chat_id=GROUP)  # her own: supersedes
        await wait_for(lambda: "Something else, then." in tg.chat_texts(GROUP))
        assert launched(kernel) == ["moon"]
        await wait_for(lambda: not mars.buttons)
    assert mars.text.endswith('A new message came instead: denied: launch(target="mars")')
    model.assert_complete()
