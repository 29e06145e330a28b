"""What the CLI channel waits for after a line: a reminder that fires between a
message and the start of its turn is shown, and the wait for the answer goes on
(the prompt does not come back before the answer)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.extensions.sdk.testing import FakeContext, load_extension

CLI_EXT = Path(__file__).resolve().parents[2] / "sandbox" / "extensions" / "cli_channel"


async def _channel(tmp_path: Path):
    ext = load_extension(CLI_EXT)
    ext._interactive = False  # the wait, without a terminal's raw mode
    await ext.initialize(FakeContext(tmp_path, extension_id="cli_channel"))
    return ext


@pytest.mark.asyncio
async def test_a_reminder_before_the_turn_starts_does_not_end_the_wait(tmp_path, capsys):
    cli = await _channel(tmp_path)
    asked = asyncio.create_task(cli._ask("a slow question"))
    await asyncio.sleep(0)  # the message is sent; its turn has not started
    await cli.send_to_user("local", "⏰ Reminder: tea")
    await asyncio.sleep(0)
    assert not asked.done()  # still waiting for the answer
    await cli.on_stream_start("local")
    await cli.on_stream_end("local", "echo: a slow question")
    await asyncio.wait_for(asked, 5)
    assert capsys.readouterr().out == "⏰ Reminder: tea\necho: a slow question\n"


@pytest.mark.asyncio
async def test_a_commands_answer_ends_the_wait(tmp_path):
    cli = await _channel(tmp_path)
    asked = asyncio.create_task(cli._ask("/status"))
    await asyncio.sleep(0)
    await cli.send_to_user("local", "Uptime: 3 s")
    await asyncio.wait_for(asked, 5)


@pytest.mark.asyncio
async def test_a_reminder_while_the_answer_streams_does_not_end_the_wait(tmp_path):
    cli = await _channel(tmp_path)
    asked = asyncio.create_task(cli._ask("a question"))
    await asyncio.sleep(0)
    await cli.on_stream_start("local")
    await cli.send_to_user("local", "⏰ Reminder: tea")
    await asyncio.sleep(0)
    assert not asked.done()
    await cli.on_stream_end("local", "the answer")
    await asyncio.wait_for(asked, 5)
