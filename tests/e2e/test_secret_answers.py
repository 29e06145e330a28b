"""Issue 28 item 11: the answer to a ``secret`` question never reaches the journal.

A password typed on Telegram for an extension's ``ui_request("secret", …)`` was
journaled in clear as ``system.ui.answer`` and printed by ``main.py events
--json``; typed as ``/answer ID …`` on a channel without buttons it was
journaled as a ``user.message``. The answer now passes in memory (ADR 0048):
the asking extension — in process or isolated — gets it, and no file of the
data directory, no log line and no ``main.py events`` output holds it.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.fake_telegram import FakeTelegram
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, conversing, running_kernel, wait_for
from support.hooks_kit import LOADER
from support.telegram_support import ALICE, install_extension, telegram_config

SECRET = "s3cr3t-Value-42"
# the extension compares a digest: its code (copied into the data dir's code snapshot, ADR 0073)
# must not carry the secret, or the scan below would find the code, not a leak
SECRET_SHA = hashlib.sha256(SECRET.encode()).hexdigest()

# The tool tells the model only whether the answer came through whole: the
# secret itself must not reach the model, the replay recording or the history.
ASKER = ext_code(
    header="""
    import hashlib
    from agents import function_tool
    from core.extensions.sdk import side_effects
    """,
    body=f"""
    def get_tools(self):
        @function_tool
        async def ask_secret() -> str:
            "Ask the user for their API key."
            answer = await self.ctx.ui_request("secret", "Your API key?", timeout_s=30)
            digest = hashlib.sha256(str(answer).encode()).hexdigest()
            return f"secret received: {{digest == {SECRET_SHA!r}}}"
        return [side_effects(ask_secret, False)]
    """,
)


def nowhere_in(data_dir: Path) -> list[str]:
    """Files of the data directory (databases, their WAL, logs) holding the secret."""
    return [
        str(path)
        for path in data_dir.rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]


def events_json(settings: Path) -> str:
    main = str(PROJECT_ROOT / "main.py")
    argv = [sys.executable, main, "events", "--json", "--limit", "500", "--settings", str(settings)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
async def test_a_secret_typed_on_telegram_is_never_journaled(
    make_ext, settings_file, ext_root, monkeypatch, caplog, isolation
):
    caplog.set_level(logging.INFO)
    with FakeOpenAIServer() as srv, FakeTelegram() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", tg.token)
        install_extension(ext_root)
        make_ext("asker", ASKER, conversing({"isolation": isolation}))
        settings = settings_file(
            channels={"default": "telegram_channel"},
            extensions={"telegram_channel": telegram_config(tg)},
            models=models_section(srv.base_url),
            loader=LOADER,  # a plugin host starts slowly on a loaded machine
        )
        srv.script(ToolCall("ask_secret", {}), "Done.")
        async with running_kernel(settings) as kernel:
            assert kernel.loader.records["asker"].status.value == "active"
            tg.send_update("set up my key", user_id=ALICE)
            await wait_for(lambda: any("Your API key?" in t for t in tg.chat_texts(ALICE)), 30)
            tg.send_update(SECRET, user_id=ALICE)  # the owner's next message answers it
            await wait_for(lambda: "Done." in tg.chat_texts(ALICE), 30)
            data_dir = kernel.data_dir
    assert srv.requests[-1]["messages"][-1]["content"] == "secret received: True"
    assert any(c.method == "deleteMessage" for c in tg.calls)  # not left in the chat
    assert nowhere_in(data_dir) == []
    assert SECRET not in events_json(settings)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


async def test_a_secret_typed_before_telegram_confirms_the_question_still_answers_it(
    make_ext, settings_file, ext_root, monkeypatch
):
    """The owner answers while the bot still waits for Telegram's reply to the
    question's sendMessage: the answer is the answer, not a new message."""
    with FakeOpenAIServer() as srv, FakeTelegram() as tg:
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", tg.token)
        install_extension(ext_root)
        make_ext("asker", ASKER, conversing())
        settings = settings_file(
            channels={"default": "telegram_channel"},
            extensions={"telegram_channel": telegram_config(tg)},
            models=models_section(srv.base_url),
        )
        srv.script(ToolCall("ask_secret", {}), "Done.")
        tg.reply_before_sent("Your API key?", SECRET, user_id=ALICE)
        async with running_kernel(settings) as kernel:
            record = kernel.loader.records["telegram_channel"]
            assert record.status.value == "active", record.error
            tg.send_update("set up my key", user_id=ALICE)
            await wait_for(lambda: "Done." in tg.chat_texts(ALICE), 30)
            data_dir = kernel.data_dir
    assert srv.requests[-1]["messages"][-1]["content"] == "secret received: True"
    assert len(srv.requests) == 2  # the secret was never a message of its own
    assert nowhere_in(data_dir) == []


async def test_a_secret_typed_as_an_answer_command_is_never_journaled(
    make_ext, settings_file, caplog
):
    """A channel without buttons: the user types ``/answer ID <secret>``."""
    caplog.set_level(logging.INFO)
    with FakeOpenAIServer() as srv:
        make_ext("asker", ASKER, conversing())
        make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
        srv.script(ToolCall("ask_secret", {}), "Done.")
        settings = settings_file(
            channels={"default": "capture"}, models=models_section(srv.base_url)
        )
        async with running_kernel(settings) as kernel:
            capture = kernel.loader.instance("capture")

            def sent() -> list[str]:
                return [text for _, _, text in capture._log()]

            await capture.say("set up my key")
            question = (await wait_for(sent))[0]
            request_id = question.split("/answer ")[1].split()[0]
            assert await capture.say(f"/answer {request_id} {SECRET}") == 0  # nothing journaled
            await wait_for(lambda: "Done." in sent())
            data_dir = kernel.data_dir
    assert "Answered." in sent()
    assert srv.requests[-1]["messages"][-1]["content"] == "secret received: True"
    assert nowhere_in(data_dir) == []
    assert SECRET not in events_json(settings)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
