"""``notify_user(text, channel_id, *, user_id=...)`` (ADR 0017): a proactive message
for one user reaches that user through the channel's ``send_to_user``; without a
user it goes to the channel's own default (``send_message``) — the same from an
in-process and from an isolated extension."""

from __future__ import annotations

import pytest

from conftest import ext_code
from support.harness import CAPTURE_CHANNEL, running_kernel, wait_for

NOTIFIER = ext_code(
    """
    async def start(self):
        await self.ctx.notify_user("for bob", "capture", user_id="bob")
        await self.ctx.notify_user("for anyone", "capture")
        await self.ctx.notify_user("channel gone", "missing", user_id="bob")
    """
)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_notify_user_reaches_the_named_user_or_the_channel_default(
    mode, make_ext, settings_file
):
    make_ext("capture", CAPTURE_CHANNEL)
    make_ext("notifier", NOTIFIER, {"isolation": mode})
    path = settings_file(channels={"default": "capture"}, isolation={"call_timeout_s": 10})
    async with running_kernel(path) as kernel:
        sent = kernel.loader.instance("capture")._log()
        await wait_for(lambda: len(sent) == 3)
    assert sorted(sent, key=lambda row: row[2]) == [
        ("notify", None, "channel gone"),  # a user id belongs to its channel: not carried over
        ("notify", None, "for anyone"),
        ("reply", "bob", "for bob"),
    ]
