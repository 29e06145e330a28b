"""Replay records each workflow run (issue 44, ADR 0091): a run with a tool step, an
agent step and a question is recorded as the session ``workflow:RUN``, listed by
``main.py replay --list``, and replayed by ``main.py replay workflow:RUN`` against the
recorded model answers, tool results and answers — without asking the model — and a
changed step shows as a divergence at that step."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer
from support.harness import running_kernel, wait_for
from support.replay_kit import model_settings

# a channel that keeps what it is sent and asked; the test answers its questions
ASKING_CHANNEL = ext_code(
    """
    sent = None
    asked = None
    def _log(self):
        if self.sent is None:
            self.sent, self.asked = [], []
        return self.sent
    async def send_to_user(self, user_id, message):
        self._log().append(message)
    async def send_message(self, message):
        self._log().append(message)
    async def ask_user(self, user_id, request):
        self._log()
        self.asked.append(request)
    async def close_request(self, user_id, request_id, outcome):
        pass
    async def say(self, text, user_id="u1"):
        return await self.ctx.on_user_message(text, user_id)
    async def answer(self, request_id, value, user_id="u1"):
        await self.ctx.answer_request(request_id, value, user_id)
    """
)
# a side-effecting tool: asked under `safe`, stood in for by a replay
CHORES = ext_code(
    header="from agents import function_tool",
    body="""
    def get_tools(self):
        @function_tool
        def record(text: str) -> str:
            "Write a line down."
            return f"recorded {text}"

        return [record]
    """,
)


def morning(prompt: str) -> dict:
    return {
        "name": "morning",
        "steps": [
            {"id": "first", "tool": "record", "args": {"text": "one {{input}}"}},
            {"id": "summary", "agent": prompt},
            {"id": "ok", "ask": "Send it?"},
            {
                "id": "tell",
                "notify": "Morning: {{summary}}",
                "when": {"step": "ok", "equals": "yes"},
            },
        ],
    }


def household(make_ext, settings_file, srv: FakeOpenAIServer, prompt: str) -> Path:
    make_ext("capture", ASKING_CHANNEL, {"permissions": {"user_messages": True}})
    make_ext("chores", CHORES, {"workflows": [morning(prompt)], "side_effects": True})
    return settings_file(
        models=model_settings(srv),
        policy={"profile": "safe"},
        channels={"default": "capture"},
        workflows={"poll_s": 0.2},
    )


async def replay_cli(settings: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(PROJECT_ROOT / "main.py"), "replay", "--settings", str(settings)]
    return await asyncio.to_thread(
        subprocess.run, [*command, *args], capture_output=True, text=True, timeout=180
    )


async def record_run(path: Path) -> str:
    """``/run morning today``: the approval and the question answered yes; the run id."""
    async with running_kernel(path) as kernel:
        channel = kernel.loader.instance("capture")
        await channel.say("/run morning today")
        await wait_for(lambda: any("Started morning" in m for m in channel._log()), timeout=30)
        started = next(m for m in channel._log() if "Started morning" in m)
        run_id = started.split("(run ")[1].split(")")[0]
        for count in (1, 2):  # the tool step's approval, then the ask step
            await wait_for(lambda n=count: len(channel.asked) >= n, timeout=30)
            await channel.answer(channel.asked[count - 1].id, "yes")
        await wait_for(lambda: "Morning: all quiet" in channel._log(), timeout=30)
        run = await kernel.workflows.store.run(run_id)
        await wait_for(lambda: run is not None)
    return run_id


async def test_a_run_is_recorded_and_replayed_without_the_model(
    make_ext, settings_file, tmp_path
) -> None:
    with FakeOpenAIServer() as srv:
        srv.script("all quiet")
        path = household(make_ext, settings_file, srv, "Summarise: {{first}}")
        run_id = await record_run(path)
        session = f"workflow:{run_id}"
        asked = len(srv.requests)
        assert asked == 1

        listed = await replay_cli(path, "--list")
        assert listed.returncode == 0, listed.stderr
        row = next(line for line in listed.stdout.splitlines() if line.startswith(session))
        assert row.split("\t")[1] == "4 steps"

        same = await replay_cli(path, session)
        assert same.returncode == 0, same.stdout + same.stderr
        assert same.stdout.startswith(f"identical: {session}, 4 steps")
        assert len(srv.requests) == asked  # the model was not asked again

        trace = tmp_path / "run.jsonl"
        exported = await replay_cli(path, "--export", session, str(trace))
        assert exported.returncode == 0, exported.stderr
        from_file = await replay_cli(path, "--trace", str(trace), "--json")
        assert from_file.returncode == 0, from_file.stdout + from_file.stderr
        assert json.loads(from_file.stdout)["status"] == "identical"

        household(make_ext, settings_file, srv, "Summarise briefly: {{first}}")
        changed = await replay_cli(path, session, "--json")
        assert changed.returncode == 1, changed.stdout + changed.stderr
        report = json.loads(changed.stdout)
        assert report["status"] == "diverged"
        assert report["divergence"]["step"] == 2
        assert report["divergence"]["step_id"] == "summary"
        assert "Summarise briefly: recorded one today" in report["divergence"]["diff"]
        words = await replay_cli(path, session)
        assert words.returncode == 1
        assert f"diverged: {session}, step 2 (summary), frame" in words.stdout
        assert len(srv.requests) == asked
