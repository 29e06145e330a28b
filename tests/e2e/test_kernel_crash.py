"""SIGKILL the kernel in the middle of a turn: after a restart the message is
answered exactly once and the history holds the exchange once — killed in
the model call (the model is asked again) or between the recorded answer and
its send (the recorded answer is sent; the model is not asked again)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from support.fake_openai import FakeOpenAIServer, models_section
from support.harness import CAPTURE_MANIFEST, count_mentions
from support.kernel_process import kill, start_kernel
from support.storage_backends import stored_history

# A channel that journals one user message (idempotently: every start tries)
# and appends each reply to a file. With `hang_marker`, its first send ever
# creates that file and never returns (the test kills the kernel there).
FILE_CHANNEL = """
import asyncio
import os

class Ext:
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
        self.hang_marker = context.get_config("hang_marker")
    async def start(self):
        await self.ctx.on_user_message("what is up?", "u1", idempotency_key="first-message")
    async def stop(self):
        pass
    async def destroy(self):
        pass
    def health_check(self):
        return True
    async def send_to_user(self, user_id, message):
        if self.hang_marker and not os.path.exists(self.hang_marker):
            open(self.hang_marker, "w").close()
            await asyncio.Event().wait()
        with open(self.out, "a") as f:
            f.write(message + "\\n")
            f.flush()
            os.fsync(f.fileno())
    async def send_message(self, message):
        await self.send_to_user("-", message)
"""


def restart_until_answered(settings: Path, out: Path) -> None:
    """Start again on the same data; wait for a reply (and for any second one)."""
    second = start_kernel(settings)
    try:
        deadline = time.monotonic() + 30
        while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # anything sent twice would arrive now
    finally:
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=30)
    assert second.returncode == 0, stderr


def asked(srv: FakeOpenAIServer, text: str) -> int:
    return len([r for r in srv.requests if r["messages"][-1]["content"] == text])


def test_sigkill_mid_turn_answers_exactly_once_after_restart(
    make_ext, settings_file, tmp_path, storage_backend
):
    out = tmp_path / "replies.txt"
    make_ext("filechan", FILE_CHANNEL, {"config": {"out": str(out)}, **CAPTURE_MANIFEST})
    with FakeOpenAIServer(delay_s=30) as srv:
        settings = settings_file(
            channels={"default": "filechan"},
            models=models_section(srv.base_url, max_retries=0),
            storage=storage_backend,
        )
        first = start_kernel(settings)
        try:
            srv.wait_for_requests(1, timeout_s=90)  # the turn is in the model call
        finally:
            kill(first)
        assert not out.exists()  # killed before any reply

        srv.delay_s = 0
        srv.script("All good.")
        restart_until_answered(settings, out)
    assert out.read_text() == "All good.\n"
    # the message was journaled once (idempotent) and asked of the model twice
    assert asked(srv, "what is up?") == 2
    items = stored_history(storage_backend, tmp_path / "data", "filechan:u1")
    assert count_mentions(items, "what is up?") == 1 and count_mentions(items, "All good.") == 1


def test_sigkill_between_answer_and_send_sends_the_recorded_answer_once(
    make_ext, settings_file, tmp_path, storage_backend
):
    out = tmp_path / "replies.txt"
    marker = tmp_path / "sending"
    make_ext(
        "filechan",
        FILE_CHANNEL,
        {"config": {"out": str(out), "hang_marker": str(marker)}, **CAPTURE_MANIFEST},
    )
    with FakeOpenAIServer() as srv:
        srv.script("Recorded before the crash.")
        settings = settings_file(
            channels={"default": "filechan"},
            models=models_section(srv.base_url, max_retries=0),
            storage=storage_backend,
        )
        first = start_kernel(settings)
        try:
            deadline = time.monotonic() + 30
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert marker.exists(), "the kernel never tried to send the reply"
        finally:
            kill(first)  # the model has answered; the channel has not got the reply
        assert not out.exists()

        srv.script("A second answer must never be asked for.")
        restart_until_answered(settings, out)
    assert out.read_text() == "Recorded before the crash.\n"  # delivered exactly once
    assert asked(srv, "what is up?") == 1  # the model was called once
    items = stored_history(storage_backend, tmp_path / "data", "filechan:u1")
    assert count_mentions(items, "what is up?") == 1
    assert count_mentions(items, "Recorded before the crash.") == 1
    assert count_mentions(items, "second answer") == 0
