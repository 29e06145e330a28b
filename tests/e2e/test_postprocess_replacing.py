"""An extension offering a post-processor a bundled one already has takes the name
only when the user's grant says so (issue 46; the rule tools and commands follow,
ADR 0027): ``extensions grant`` asks about ``#json`` like about ``/reminders``."""

from __future__ import annotations

import asyncio

import pytest

from conftest import ext_code, grant_all
from core.cli.grant import grant_extensions
from core.config import load_settings
from support.harness import CAPTURE_CHANNEL, running_kernel

MY_JSON = ext_code(
    """
    name = "json"
    output_target = "chat_append"
    description = "my own JSON"
    def validate_param(self, param):
        return True, None
    async def execute(self, context, param):
        return PostProcessResult(self.name, {"mine": True})
    """,
    "from core.extensions.contract import PostProcessResult",
)


async def owner_of_json(path) -> tuple[str, str | None]:
    async with running_kernel(path) as kernel:
        entry = kernel.shaping.post.catalog.get("json")
        assert entry is not None
        return entry.owner, entry.replaced


@pytest.mark.usefixtures("postprocessors")
def test_a_bundled_post_processor_is_replaced_only_with_consent(
    make_ext, settings_file, tmp_path, capsys
):
    make_ext("capture", CAPTURE_CHANNEL)
    make_ext("aaa", MY_JSON, {"permissions": {"conversations": True}})
    path = settings_file(channels={"default": "capture"})
    grant_all(tmp_path / "extensions", tmp_path / "data")
    assert asyncio.run(owner_of_json(path)) == ("postprocessors", None)

    answers = iter([True, False])  # grant it, but keep the bundled names
    assert grant_extensions(load_settings(path), ["aaa"], ask=lambda _q: next(answers)) == 0
    assert "replaces `#json` from postprocessors" in capsys.readouterr().out
    assert asyncio.run(owner_of_json(path)) == ("postprocessors", None)

    assert grant_extensions(load_settings(path), ["aaa"], ask=lambda _q: True) == 0
    assert asyncio.run(owner_of_json(path)) == ("aaa", "postprocessors")
