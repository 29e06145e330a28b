"""A turn's token usage reaches a channel that asks for it with the reply (issue 30):
a ``usage`` parameter on ``send_to_user`` / ``on_stream_end``, in process and
across the plug-in host's wire; channels without it are called as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agents.testing import ScriptedModel, assistant_message
from agents.usage import InputTokensDetails, Usage

from conftest import ext_code
from core.events.system_payloads import UserMessage
from core.events.topics import SystemTopics
from support.harness import CAPTURE_MANIFEST, running_kernel, wait_for

FILE_CHANNEL = ext_code(
    """
    async def send_to_user(self, user_id, message{usage_param}):
        line = {{"to": user_id, "text": message, "usage": {usage_value}}}
        with open(self.ctx.data_dir / "replies.jsonl", "a") as f:
            f.write(json.dumps(line) + "\\n")
    async def send_message(self, message):
        pass
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    """,
    header="import json\n",
)


def channel_code(takes_usage: bool) -> str:
    if takes_usage:
        return FILE_CHANNEL.format(usage_param=", usage=None", usage_value="usage")
    return FILE_CHANNEL.format(usage_param="", usage_value='"none taken"')


def lines(root: Path) -> list[dict]:
    """The replies the channel wrote to its data dir (where an isolated one may write)."""
    found = [
        json.loads(line) for p in root.rglob("replies.jsonl") for line in p.read_text().splitlines()
    ]
    return found


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
@pytest.mark.parametrize("takes_usage", [True, False])
async def test_the_reply_brings_the_turns_usage_to_a_channel_that_takes_it(
    make_ext, settings_file, tmp_path, isolation, takes_usage
):
    out = tmp_path / "data"
    manifest = {**CAPTURE_MANIFEST, "isolation": isolation}
    make_ext("files", channel_code(takes_usage), manifest)
    model = ScriptedModel([[assistant_message("Hello.")]])
    details = InputTokensDetails(cached_tokens=40, cache_write_tokens=0)
    model.set_default_usage(
        Usage(
            requests=1,
            input_tokens=120,
            input_tokens_details=details,
            output_tokens=9,
            total_tokens=129,
        )
    )
    path = settings_file(channels={"default": "files"}, isolation={"call_timeout_s": 10})
    async with running_kernel(path, model=model) as kernel:
        message = UserMessage(text="hi", user_id="u1", channel_id="files")
        await kernel.bus.publish(SystemTopics.USER_MESSAGE, "files", message.to_payload())
        await wait_for(lambda: lines(out), timeout=30)
    [reply] = lines(out)
    assert reply["text"] == "Hello."
    if takes_usage:
        assert reply["usage"] == {
            "input_tokens": 120,
            "cached_input_tokens": 40,
            "output_tokens": 9,
            "total_tokens": 129,
            "requests": 1,
        }
    else:
        assert reply["usage"] == "none taken"
