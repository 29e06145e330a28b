"""In a running kernel, post-processor activations belong to the person (issue 46):
one Alice makes on one channel is hers on every channel (``people:``), Bob's are
his own, and a message on another channel runs it."""

from __future__ import annotations

import pytest
from agents.testing import ScriptedModel, assistant_message

from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

PEOPLE = {
    "alice": {"role": "owner", "identities": ["capture:alice", "telegram:111", "cli:local"]},
    "bob": {"role": "member", "identities": ["capture:bob"]},
}


async def say(kernel, text: str, who: str) -> list[str]:
    """``text`` from ``who`` on the capture channel; every message to them after it,
    once the reply (and any follow-up) is there."""
    capture = kernel.loader.instance("capture")
    before = len(capture._log())
    await capture.say(text, who)
    await wait_for(lambda: any(u == who for _, u, _ in capture._log()[before:]), timeout=60)
    return [m for _, u, m in capture._log()[before:] if u == who]


@pytest.mark.usefixtures("postprocessors")
async def test_an_activation_made_on_one_channel_applies_on_another(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, people=PEOPLE)
    model = ScriptedModel([[assistant_message("The web tier is down.")]])
    async with running_kernel(path, model=model) as kernel:
        post = kernel.shaping.post
        assert await say(kernel, "/ext activate decision binary", "alice") == [
            "Activated #decision2 (decision, default param binary)."
        ]
        on_telegram = [n for n, _ in await post.activated_names("telegram", "111")]
        on_cli = [n for n, _ in await post.activated_names("cli", "local")]
        bobs = [n for n, _ in await post.activated_names("capture", "bob")]
        assert "decision2" in on_telegram and "decision2" in on_cli
        assert "decision2" not in bobs
        assert (await say(kernel, "/ext set decision2 warning", "alice")) == [
            "#decision2 runs with warning by default now."
        ]
        await say(kernel, "Is it up? #decision2", "alice")
        last = await say(kernel, "/last decision2", "alice")
    # warning, not binary (which would say "yes"): the changed default was used
    assert '"branch_key": "threshold_exceeded_critical"' in last[0]


@pytest.mark.usefixtures("postprocessors")
async def test_a_member_cannot_read_a_processors_source(make_ext, settings_file):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    path = settings_file(channels={"default": "capture"}, people=PEOPLE)
    async with running_kernel(path, model=ScriptedModel([])) as kernel:
        assert await say(kernel, "/ext show json", "bob") == [
            "Only the owner can read a post-processor's source."
        ]
        (shown,) = await say(kernel, "/ext show json", "alice")
    assert "```python" in shown
