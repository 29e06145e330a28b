"""SIGKILL the kernel while a question is pending (ADR 0021): after a restart the
question is still answerable, and once approved the tool runs once and the
user gets one reply. SIGKILL it while an approved call runs: after a restart
the call is not run again, the model reads that it was interrupted, and the
user still gets one reply. Real kernel subprocesses, the fake model server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section
from support.harness import CAPTURE_MANIFEST, count_mentions
from support.kernel_process import kill, start_kernel, wait_until
from support.storage_backends import stored_history

# A channel that journals one user message at start (idempotently), appends
# everything it is sent to `out`, and journals each line appended to `inbox`
# as the user's message (each line once, whatever the restarts).
INBOX_CHANNEL = """
import asyncio
import os

class Ext:
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
        self.inbox = context.get_config("inbox")
    async def start(self):
        await self.ctx.on_user_message("launch at the moon", "u1", idempotency_key="first")
    async def stop(self):
        pass
    async def destroy(self):
        pass
    def health_check(self):
        return True
    async def run_background(self):
        seen = 0
        while True:
            lines = open(self.inbox).read().splitlines() if os.path.exists(self.inbox) else []
            for number, line in enumerate(lines[seen:], seen):
                await self.ctx.on_user_message(line, "u1", idempotency_key=f"inbox-{number}")
            seen = len(lines)
            await asyncio.sleep(0.05)
    async def send_to_user(self, user_id, message):
        with open(self.out, "a") as f:
            f.write(message.replace("\\n", " ") + "\\n")
            f.flush()
            os.fsync(f.fileno())
    async def send_message(self, message):
        await self.send_to_user("-", message)
"""

# `launch` (side-effecting: it says nothing) logs each run; with `hang_marker` its
# first run ever creates that file after logging and never returns.
ROCKETS = ext_code(
    """
    def get_tools(self):
        log, marker = self.ctx.get_config("log"), self.ctx.get_config("hang_marker")

        @function_tool
        async def launch(target: str) -> str:
            "Launch a rocket at a target."
            with open(log, "a") as f:
                f.write(target + "\\n")
                f.flush()
                os.fsync(f.fileno())
            if marker and not os.path.exists(marker):
                open(marker, "w").close()
                await asyncio.Event().wait()
            return f"launched at {target}"

        return [launch]
    """,
    header="import asyncio\nimport os\nfrom agents import function_tool\n",
)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def question_ids(out: Path) -> list[str]:
    return [m.group(1) for line in lines(out) if (m := re.search(r"/approve (\w+) ", line))]


def setup(
    make_ext,
    settings_file,
    tmp_path: Path,
    srv: FakeOpenAIServer,
    storage: dict[str, str] | None = None,
    **rockets: str,
):
    files = {name: tmp_path / name for name in ("out", "inbox", "log")}
    config = {"out": str(files["out"]), "inbox": str(files["inbox"])}
    make_ext("inbox", INBOX_CHANNEL, {"config": config, **CAPTURE_MANIFEST})
    make_ext("rockets", ROCKETS, {"config": {"log": str(files["log"]), **rockets}})
    settings = settings_file(
        channels={"default": "inbox"},
        models=models_section(srv.base_url, max_retries=0),
        policy={"profile": "safe"},
        storage=storage or {"backend": "sqlite"},
    )
    return settings, files


def stop(proc) -> None:
    proc.terminate()
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr


def test_sigkill_while_a_question_is_pending_then_approve_after_restart(
    make_ext, settings_file, tmp_path, storage_backend
):
    storage = storage_backend  # paused turns and their RunState: sessions.db or PostgreSQL
    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("launch", {"target": "moon"}), "Launched at the moon.")
        settings, files = setup(make_ext, settings_file, tmp_path, srv, storage)
        first = start_kernel(settings)
        try:
            wait_until(lambda: question_ids(files["out"]))
        finally:
            kill(first)
        assert not files["log"].exists()  # nothing ran while the question was open
        [asked] = question_ids(files["out"])

        second = start_kernel(settings)
        try:
            wait_until(lambda: len(question_ids(files["out"])) == 2)  # asked again
            assert question_ids(files["out"]) == [asked, asked]  # the same question
            files["inbox"].write_text(f"/approve {asked}\n")
            wait_until(lambda: "Launched at the moon." in lines(files["out"]))
            time.sleep(0.5)  # anything done twice would show now
        finally:
            stop(second)
    assert lines(files["log"]) == ["moon"]  # the tool ran once
    assert lines(files["out"]).count("Launched at the moon.") == 1  # one reply
    assert len(srv.requests) == 2  # the first model call was not repeated
    assert srv.requests[1]["messages"][-1]["content"] == "launched at moon"
    items = stored_history(storage, tmp_path / "data", "inbox:u1")
    assert count_mentions(items, "launch at the moon") == 1
    assert count_mentions(items, "Launched at the moon.") == 1


def test_sigkill_while_an_approved_call_runs_never_runs_it_twice(make_ext, settings_file, tmp_path):
    marker = tmp_path / "running"
    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("launch", {"target": "moon"}), "It may not have launched.")
        settings, files = setup(make_ext, settings_file, tmp_path, srv, hang_marker=str(marker))
        first = start_kernel(settings)
        try:
            wait_until(lambda: question_ids(files["out"]))
            files["inbox"].write_text(f"/approve {question_ids(files['out'])[0]}\n")
            wait_until(marker.exists)  # the approved call is running
        finally:
            kill(first)

        second = start_kernel(settings)
        try:
            wait_until(lambda: "It may not have launched." in lines(files["out"]))
            time.sleep(0.5)
        finally:
            stop(second)
    assert lines(files["log"]) == ["moon"]  # started once, never again
    assert lines(files["out"]).count("It may not have launched.") == 1
    assert "not run again" in srv.requests[-1]["messages"][-1]["content"]
    frames = subprocess.run(
        [
            sys.executable,
            str(PROJECT_ROOT / "main.py"),
            "--settings",
            str(settings),
            "events",
            "--topic",
            "hook.approval",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    decisions = [(e["payload"]["decision"], e["payload"]["by"]) for e in json.loads(frames.stdout)]
    assert sorted(d for d, _ in decisions) == ["approved", "asked", "interrupted"]
    assert ("approved", "inbox:u1") in decisions
