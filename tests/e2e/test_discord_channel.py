"""The Discord channel (issue 48, ADR 0094) through a whole kernel and discord.py,
over real HTTP and a real websocket to a fake Discord: a DM answered, a mention in
a served channel answered there, a long reply split at 2,000 characters, a 429
waited out, replies streamed by edits at a bounded rate, an approval answered in
place with a button, a stranger given a pairing code and nothing else, a reminder
delivered to the DM of whoever set it; and, with the kernel a real process, a
SIGKILL between the answer and its sending delivers the reply once after restart."""

from __future__ import annotations

import itertools
import re

import pytest
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.bundled import copy_bundled
from support.discord_support import ALICE, CHANNEL, MALLORY, install, write_settings
from support.fake_discord import Failure, FakeDiscord
from support.harness import running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.telegram_support import slow_stream

OTHER_CHANNEL = 520_000_000_000_000_099
SECRET = "s3cr3t-Value-42"
ASKER = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body=f"""
    def get_tools(self):
        @function_tool
        async def ask_secret() -> str:
            "Ask the user for their API key."
            answer = await self.ctx.ui_request("secret", "Your API key?", timeout_s=30)
            return f"secret received: {{answer == {SECRET!r}}}"
        return [side_effects(ask_secret, False)]
    """,
)


@pytest.fixture
def dc(monkeypatch, ext_root):
    install(ext_root)
    with FakeDiscord() as server:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", server.token)
        yield server


def replies(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(text)] for text in texts])


async def test_a_dm_and_a_mention_are_answered_where_they_were_written(dc, settings_file):
    long_reply = "\n\n".join(f"paragraph {i}: " + " ".join(["word"] * 80) for i in range(12))
    model = replies("hello Alice", long_reply, "hello channel")
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("hi", user_id=ALICE)
        await wait_for(lambda: dc.dm_texts(ALICE) == ["hello Alice"])
        dc.send_dm("tell me a long story", user_id=ALICE)
        await wait_for(lambda: len(dc.dm_texts(ALICE)) >= 4)
        dc.send_channel("not for you", user_id=ALICE, channel_id=CHANNEL, mention=False)
        dc.send_channel("hello from the server", user_id=ALICE, channel_id=OTHER_CHANNEL)
        dc.send_channel("hello from the server", user_id=ALICE, channel_id=CHANNEL)
        await wait_for(lambda: dc.texts(CHANNEL) == ["hello channel"])
    pieces = dc.dm_texts(ALICE)[1:]
    assert all(len(p) <= 2000 for p in pieces) and len(pieces) == 3
    assert "\n\n".join(pieces) == long_reply.strip()
    assert dc.texts(OTHER_CHANNEL) == []
    seen = [str(m.input) for m in model.calls]  # type: ignore[attr-defined]
    assert len(model.calls) == 3, seen  # the unmentioned message reached no model
    assert "<@" not in seen[2]  # the bot's own mention is taken out of the text


async def test_a_429_is_waited_out_and_the_reply_sent_once(dc, settings_file):
    dc.fail_next("POST", "/messages", Failure(429, retry_after=0.6))
    async with running_kernel(write_settings(settings_file, dc), model=replies("patience")):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("hi", user_id=ALICE)
        await wait_for(lambda: dc.dm_texts(ALICE) == ["patience"])
    refused, accepted = dc.calls_of("POST", "/messages")
    assert accepted.at - refused.at >= 0.55  # discord.py slept the retry_after (0.6 s) it was told


async def test_a_reply_streams_by_editing_one_message_at_most_once_per_interval(dc, settings_file):
    parts = [f"word{i} " for i in range(25)]  # 25 chunks over ~2.5 s
    model = ScriptedModel([slow_stream(parts, 0.1)])
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("stream please", user_id=ALICE)
        await wait_for(lambda: dc.dm_texts(ALICE) == ["".join(parts).strip()], timeout=15)
    (message,) = dc.messages(dc.dm_channel(ALICE))
    assert 1 <= len(message.edits) <= 3  # previews about every second, then the final text
    writes = [c.at for c in dc.calls() if c.method in ("POST", "PATCH") and "/messages" in c.path]
    gaps = [b - a for a, b in itertools.pairwise(writes)]
    assert min(gaps) >= 0.95, gaps
    assert dc.calls_of("POST", "/typing")  # "typing…" while the model starts


async def test_an_approval_is_answered_in_place_with_a_button(
    dc, settings_file, make_ext, ext_root
):
    make_ext("rockets", ROCKETS)
    model = ScriptedModel(
        [
            [function_call("launch", {"target": "moon"}, call_id="c1")],
            [assistant_message("Launched at the moon.")],
        ]
    )
    settings = write_settings(settings_file, dc, sections={"policy": {"profile": "safe"}})
    async with running_kernel(settings, model=model) as kernel:
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("launch at the moon", user_id=ALICE)
        channel = dc.dm_channel(ALICE)
        asked = await wait_for(lambda: [m for m in dc.messages(channel) if m.buttons])
        question = asked[0]
        assert question.content == 'Allow launch(target="moon")?'
        assert [label for label, _ in question.buttons] == ["Allow once", "Always allow", "Deny"]
        dc.press(question.id, "Allow once", user_id=MALLORY)  # not theirs: a note only
        await wait_for(lambda: dc.callbacks())
        assert kernel.loader.instance("rockets").log() == []
        dc.press(question.id, "Allow once", user_id=ALICE)
        await wait_for(lambda: "Launched at the moon." in dc.dm_texts(ALICE))
        await wait_for(lambda: not question.buttons)  # the buttons are gone
        assert kernel.loader.instance("rockets").log() == ["moon"]
    assert question.content == ('Allow launch(target="moon")?\nAllowed once: launch(target="moon")')
    refused, accepted = dc.callbacks()
    assert refused["type"] == 4 and refused["data"]["flags"] == 64  # only Mallory sees it
    assert refused["data"]["content"] == "You are not allowed to use this bot."
    assert accepted == {"type": 6}  # Alice's press acknowledged; the message then edited


async def test_a_stranger_gets_a_pairing_code_and_nothing_else(dc, settings_file):
    model = replies("unused")
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("hello, I am new", user_id=MALLORY)
        offer = await wait_for(lambda: dc.dm_texts(MALLORY))
        code = re.search(r"/pair (\d{6})", offer[0]).group(1)  # type: ignore[union-attr]
        dc.send_dm("/reminders", user_id=MALLORY)  # no second code, no answer
        dc.send_channel("me too", user_id=MALLORY, channel_id=CHANNEL)  # not served there
        dc.send_dm(f"/pair {code}", user_id=ALICE)  # the owner admits them
        await wait_for(lambda: len(dc.dm_texts(MALLORY)) >= 2)
        await wait_for(lambda: dc.dm_texts(ALICE))
    assert len(offer) == 1 and offer[0].startswith("Hearth does not know you yet.")
    assert dc.dm_texts(MALLORY)[1] == "You are in: Hearth answers you now."
    assert dc.dm_texts(ALICE) == [
        f"Paired Discord user {MALLORY}: a member of their own (discord:{MALLORY})."
    ]
    assert dc.texts(CHANNEL) == []
    assert model.calls == ()  # nothing of the stranger's reached the model


async def test_a_reminder_is_delivered_to_the_dm_it_was_set_from(dc, settings_file, ext_root):
    copy_bundled(ext_root, "scheduler")
    model = replies("unused")
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("/remind 2s stretch your legs", user_id=ALICE)
        await wait_for(lambda: len(dc.dm_texts(ALICE)) == 2, timeout=20)
    confirmation, reminder = dc.dm_texts(ALICE)
    assert confirmation.startswith("Reminder #1 set for ")
    assert reminder == "⏰ Reminder: stretch your legs"
    assert model.calls == ()


async def test_a_refused_token_marks_the_extension_error_and_the_kernel_runs_on(
    dc, settings_file, monkeypatch
):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "tok-wrong-123")
    async with running_kernel(write_settings(settings_file, dc)) as kernel:
        record = kernel.loader.records["discord_channel"]
        assert record.status.value == "error"
        assert "Discord rejected DISCORD_BOT_TOKEN (401 Unauthorized)" in (record.error or "")
        assert "tok-wrong-123" not in (record.error or "")
    assert dc.identifies == 0  # never on the gateway


async def test_a_secret_is_typed_into_a_form_and_never_shows_in_the_chat(
    dc, settings_file, make_ext
):
    make_ext("asker", ASKER, {"permissions": {"conversations": True}})
    model = ScriptedModel(
        [[function_call("ask_secret", {}, call_id="s1")], [assistant_message("Key kept.")]]
    )
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("take my key", user_id=ALICE)
        channel = dc.dm_channel(ALICE)
        asked = await wait_for(lambda: [m for m in dc.messages(channel) if m.buttons])
        question = asked[0]
        assert question.content.startswith("asker asks: Your API key?\n(Press Answer…")
        dc.press(question.id, "Answer…", user_id=ALICE)
        opened = await wait_for(lambda: [c for c in dc.callbacks() if c["type"] == 9])
        assert opened[0]["data"]["title"] == "Answer Hearth"
        dc.submit_form(question.id, SECRET, user_id=ALICE)
        await wait_for(lambda: "Key kept." in dc.dm_texts(ALICE))
        await wait_for(lambda: not question.buttons)
    assert "secret received: True" in str(model.calls[1].input)  # type: ignore[attr-defined]
    assert not [t for t in dc.dm_texts(ALICE) if SECRET in t]


def test_discord_users_are_people_by_their_discord_identity():
    from core.kernel.conversations import Household, identity_of

    assert identity_of("discord_channel", str(CHANNEL), str(ALICE)) == f"discord:{ALICE}"
    household = Household({}, [], discord_ids=[str(ALICE), str(MALLORY)])  # no people: section
    assert household.person("discord_channel", str(ALICE), str(ALICE)).is_owner
    assert household.person("discord_channel", str(CHANNEL), str(MALLORY)).role == "member"
