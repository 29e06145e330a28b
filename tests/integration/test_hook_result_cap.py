"""Issue 28 item 14: a hook's answer is capped like an event payload.

An isolated extension's ``on_llm_output`` answered 15 MB of text and the
kernel stored it in ``sessions.db`` as the assistant's reply. A result over
``events.max_payload_bytes`` is now refused wherever the hook runs: the hook
is skipped, the model's reply goes out and into the history unchanged, and
one warning names the extension and the size.
"""

from __future__ import annotations

import logging

import pytest
from agents.testing import ScriptedModel, assistant_message

from conftest import ext_code
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    conversing,
    running_kernel,
    session_history,
    wait_for,
)
from support.hooks_kit import HOOK_LOG, ISOLATION, LOADER, isolation_mode

MB = 1024 * 1024
HUGE = 2 * MB  # well over the 256 KiB default, well under the RPC frame limit

HOG = ext_code(
    body=f"""
    async def on_llm_output(self, output, turn):
        return "x" * {HUGE}

    async def on_plain_text(self, text, direction, turn):
        return text + " (checked)" if direction == "out" else None
    """,
)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_an_oversized_hook_answer_is_refused_and_never_stored(
    make_ext, settings_file, caplog, mode
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("hog", HOG, conversing({"isolation": isolation_mode(mode)}))
    path = settings_file(channels={"default": "capture"}, isolation=ISOLATION, loader=LOADER)
    model = ScriptedModel([[assistant_message("Hello.")]])
    caplog.set_level(logging.WARNING, logger=HOOK_LOG)
    async with running_kernel(path, model=model) as kernel:
        assert kernel.loader.records["hog"].status.value == "active"
        capture = kernel.loader.instance("capture")
        await capture.say("hi")
        [(_, _, reply)] = await wait_for(lambda: capture.sent)
        history = session_history(kernel.data_dir, "capture:u1")
        sessions_size = (kernel.data_dir / "sessions.db").stat().st_size
    # the hook was skipped; the next hook (its own on_plain_text) still ran
    assert reply == "Hello. (checked)"
    assert [item.get("role") for item in history] == ["user", "assistant"]
    assert "x" * 1000 not in str(history)
    assert sessions_size < MB
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == HOOK_LOG and r.levelno == logging.WARNING and " of hog " in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert f"hook on_llm_output of hog answered {HUGE} bytes, over the limit of " in (warnings[0])
    assert "(data unchanged)" in warnings[0]
