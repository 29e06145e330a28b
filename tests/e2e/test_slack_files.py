"""Files on Slack (issues 45 and 48, ADR 0096) through a whole kernel and
slack-bolt against the fake Slack: a tool's PNG is uploaded with files upload v2
and shared in the DM, a picture a person shares reaches the model as an image
part (fetched with the bot token), one over ``files.max_bytes`` is refused
naming the limit."""

from __future__ import annotations

import pytest

pytest.importorskip("slack_bolt", reason="the slack group is not installed (make install)")

from agents.testing import ScriptedModel, assistant_message

from support.fake_slack import FakeSlack
from support.files_kit import chart_code, chart_model, data_url, png, sent_picture
from support.harness import running_kernel, wait_for
from support.slack_support import ALICE, EXTENSION_ID, slack_settings
from support.telegram_support import install_extension


@pytest.fixture
def slack(monkeypatch, ext_root):
    install_extension(ext_root, EXTENSION_ID)
    with FakeSlack() as server:
        monkeypatch.setenv("SLACK_BOT_TOKEN", server.bot_token)
        monkeypatch.setenv("SLACK_APP_TOKEN", server.app_token)
        yield server


async def test_a_tools_png_is_uploaded_and_shared(slack, make_ext, settings_file):
    make_ext("charts", chart_code())
    async with running_kernel(slack_settings(settings_file, slack), model=chart_model()):
        slack.dm("draw the chart", user=ALICE)
        await wait_for(lambda: len(slack.dm_messages(ALICE)) == 2, timeout=30)
    [chart] = [m for m in slack.dm_messages(ALICE) if m.files]
    assert chart.text == "the chart"
    assert [(f.name, f.data) for f in chart.files] == [("chart.png", png())]
    assert [m.text for m in slack.dm_messages(ALICE) if not m.files] == ["here it is"]
    [asked] = slack.calls_of("files.getUploadURLExternal")
    assert asked.params["length"] == str(len(png()))


async def test_a_shared_picture_reaches_the_model_as_an_image_part(slack, settings_file):
    model = ScriptedModel([[assistant_message("a red square")]])
    async with running_kernel(slack_settings(settings_file, slack), model=model):
        picture = slack.files.offer(png(), "square.png", "image/png")
        slack.dm("what is this?", user=ALICE, files=[picture])
        await wait_for(lambda: slack.dm_texts(ALICE) == ["a red square"], timeout=30)
    text, image = sent_picture(model)
    assert text.startswith("what is this?")
    assert image["image_url"] == data_url(png(), "image/png")


async def test_an_oversized_upload_is_refused_naming_the_limit(slack, settings_file):
    model = ScriptedModel([])
    settings = slack_settings(settings_file, slack, files={"max_bytes": 1000})
    async with running_kernel(settings, model=model):
        big = slack.files.offer(b"x" * 5000, "big.csv", "text/csv")
        slack.dm("", user=ALICE, files=[big])
        await wait_for(lambda: slack.dm_texts(ALICE), timeout=30)
    assert slack.dm_texts(ALICE) == [
        "I could not take big.csv is 5 KB; files larger than 1 KB are not accepted "
        "(files.max_bytes)"
    ]
    assert not model.calls
