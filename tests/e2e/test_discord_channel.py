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

from support.bundled import copy_bundled
from support.discord_support import ALICE, CHANNEL, MALLORY, install, write_settings
from support.fake_discord import Failure, FakeDiscord
from support.harness import running_kernel, wait_for
from support.rocket_ext import ROCKETS
from support.telegram_support import slow_stream

OTHER_CHANNEL = 520_000_000_000_000_099


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
