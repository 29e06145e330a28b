"""SIGKILL the kernel in the middle of a turn: after a restart the message is
answered exactly once (the delivery is acknowledged only after the reply)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import PROJECT_ROOT
from fake_openai import FakeOpenAIServer

# A channel that journals one user message (idempotently: every start tries)
# and appends each reply to a file.
FILE_CHANNEL = """
import os

class Ext:
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
    async def start(self):
        await self.ctx.on_user_message("what is up?", "u1", idempotency_key="first-message")
    async def stop(self):
        pass
    async def destroy(self):
        pass
    def health_check(self):
        return True
    async def send_to_user(self, user_id, message):
        with open(self.out, "a") as f:
            f.write(message + "\\n")
            f.flush()
            os.fsync(f.fileno())
    async def send_message(self, message):
        await self.send_to_user("-", message)
"""


def start_kernel(settings: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HEARTH_SUPERVISED": "1"},
    )


def test_sigkill_mid_turn_answers_exactly_once_after_restart(make_ext, settings_file, tmp_path):
    out = tmp_path / "replies.txt"
    make_ext("filechan", FILE_CHANNEL, {"config": {"out": str(out)}})
    with FakeOpenAIServer(delay_s=30) as srv:
        settings = settings_file(
            channels={"default": "filechan"},
            models={
                "default": {"provider": "local", "model": "fake-model"},
                "providers": {
                    "local": {
                        "type": "openai_compatible",
                        "base_url": srv.base_url,
                        "api_key": "x",
                        "max_retries": 0,
                    }
                },
            },
        )
        first = start_kernel(settings)
        try:
            srv.wait_for_requests(1, timeout_s=30)  # the turn is in the model call
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
        assert not out.exists()  # killed before any reply

        srv.delay_s = 0
        srv.script("All good.")
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
    assert out.read_text() == "All good.\n"
    # the message was journaled once (idempotent) and asked of the model twice
    user_turns = [r for r in srv.requests if r["messages"][-1]["content"] == "what is up?"]
    assert len(user_turns) == 2
