"""Files on Discord (issues 45 and 48, ADR 0096) through a whole kernel, discord.py
and the fake Discord: a tool's PNG arrives as a message attachment, a picture a
person sends reaches the model as an image part, one over ``files.max_bytes`` is
refused naming the limit."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.discord_support import ALICE, install, write_settings
from support.fake_discord import FakeDiscord
from support.files_kit import chart_code, chart_model, data_url, png, sent_picture
from support.harness import running_kernel, wait_for


@pytest.fixture
def dc(monkeypatch, ext_root):
    install(ext_root)
    with FakeDiscord() as server:
        monkeypatch.setenv("DISCORD_BOT_TOKEN", server.token)
        yield server


async def test_a_tools_png_arrives_as_an_attachment(dc, make_ext, settings_file):
    make_ext("charts", chart_code())
    async with running_kernel(write_settings(settings_file, dc), model=chart_model()):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm("draw the chart", user_id=ALICE)
        await wait_for(lambda: len(dc.messages(dc.dm_channel(ALICE))) == 2)
    sent = dc.messages(dc.dm_channel(ALICE))
    [chart] = [m for m in sent if m.uploads]
    assert chart.content == "the chart"
    assert [(u.filename, u.data) for u in chart.uploads] == [("chart.png", png())]
    assert [m.content for m in sent if not m.uploads] == ["here it is"]


async def test_a_picture_sent_reaches_the_model_as_an_image_part(dc, settings_file):
    model = ScriptedModel([[assistant_message("a red square")]])
    async with running_kernel(write_settings(settings_file, dc), model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm_file(png(), "square.png", "image/png", user_id=ALICE, text="what is this?")
        await wait_for(lambda: dc.dm_texts(ALICE) == ["a red square"])
    text, image = sent_picture(model)
    assert text.startswith("what is this?")
    assert image["image_url"] == data_url(png(), "image/png")


async def test_an_oversized_upload_is_refused_naming_the_limit(dc, settings_file):
    model = ScriptedModel([])
    settings = write_settings(settings_file, dc, sections={"files": {"max_bytes": 1000}})
    async with running_kernel(settings, model=model):
        await wait_for(dc.is_connected, timeout=30)
        dc.send_dm_file(b"x" * 5000, "big.csv", "text/csv", user_id=ALICE)
        await wait_for(lambda: dc.dm_texts(ALICE))
    assert dc.dm_texts(ALICE) == [
        "I could not take big.csv is 5 KB; files larger than 1 KB are not accepted "
        "(files.max_bytes)"
    ]
    assert not model.calls
