"""Files on Telegram (issue 45, ADR 0096), over real HTTP to the fake Bot API."""

from __future__ import annotations

import pytest
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

from conftest import ext_code
from support.fake_telegram import FakeTelegram
from support.files_kit import chart_code, chart_model, png
from support.harness import running_kernel, wait_for
from support.telegram_support import ALICE, install_extension, write_settings

REPORT_TOOL = """
    def get_tools(self):
        @function_tool
        def report() -> str:
            "Write the report."
            attach(Artifact("report.csv", "text/csv", data=b"a,b\\n1,2\\n"))
            return "report written"

        return [side_effects(report, False)]
"""
REPORT_HEADER = """
    from agents import function_tool

    from core.extensions.contract import Artifact, attach
    from core.extensions.sdk import side_effects
"""


@pytest.fixture
def tg(monkeypatch):
    with FakeTelegram() as server:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", server.token)
        yield server


@pytest.fixture(autouse=True)
def _extension(ext_root):
    install_extension(ext_root)


async def test_a_tools_png_arrives_as_a_photo_with_its_caption(tg, make_ext, settings_file):
    make_ext("charts", chart_code())
    async with running_kernel(write_settings(settings_file, tg), model=chart_model()):
        tg.send_update("draw the chart", user_id=ALICE)
        await wait_for(lambda: tg.calls_of("sendPhoto"))
        await wait_for(lambda: len(tg.messages(ALICE)) == 2)
    photo = next(m for m in tg.messages(ALICE) if m.upload is not None)
    assert [m.text for m in tg.messages(ALICE) if m.upload is None] == ["here it is"]
    assert photo.text == "the chart" and photo.upload is not None
    assert (photo.upload.filename, photo.upload.data) == ("chart.png", png())
    assert tg.calls_of("sendDocument") == []


async def test_any_other_file_arrives_as_a_document(tg, make_ext, settings_file):
    make_ext("reports", ext_code(REPORT_TOOL, REPORT_HEADER))
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("report", {}, call_id="c1")]),
            ModelStep(output=[assistant_message("done")]),
        ]
    )
    async with running_kernel(write_settings(settings_file, tg), model=model):
        tg.send_update("the report please", user_id=ALICE)
        await wait_for(lambda: len(tg.messages(ALICE)) == 2)
    document = next(m for m in tg.messages(ALICE) if m.upload is not None)
    assert document.upload is not None
    assert (document.upload.filename, document.upload.data) == ("report.csv", b"a,b\n1,2\n")
    assert tg.calls_of("sendPhoto") == []
