"""Consent end to end: ``main.py`` as a subprocess with the CLI channel on piped
stdin, the real ``openai`` client against the fake model server. In ``safe``
a side-effecting call asks inline and runs only after ``y``; ``n`` and no
answer in time reach the model as denials; ``full_auto`` never asks; a
``deny`` rule never runs the tool."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT, ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"
QUESTION = 'Allow launch(target="moon")? [y]es once / [a]lways / [N]o'

# `launch` writes a line to a file each time it really runs (side-effecting: it says nothing)
ROCKETS = ext_code(
    header="from agents import function_tool",
    body="""
    def get_tools(self):
        @function_tool
        def launch(target: str) -> str:
            "Launch a rocket at a target."
            with open(self.ctx.get_config("log"), "a") as log:
                log.write(target + "\\n")
            return f"launched at {target}"
        return [launch]
    """,
)


@pytest.fixture
def fake_model():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture
def setup(settings_file, ext_root, make_ext, tmp_path, fake_model):
    log = tmp_path / "launched.txt"

    def build(**policy) -> tuple[Path, Path]:
        shutil.copytree(CLI_EXT, ext_root / "cli_channel", dirs_exist_ok=True)
        make_ext("rockets", ROCKETS, {"config": {"log": str(log)}})
        settings = settings_file(
            models=models_section(fake_model.base_url),
            policy={"profile": "safe", **policy},
        )
        return settings, log

    return build


def run_main(settings: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def tool_result(srv: FakeOpenAIServer) -> str:
    return str(srv.requests[-1]["messages"][-1]["content"])


def test_safe_asks_inline_and_runs_only_after_yes(setup, fake_model):
    settings, log = setup()
    fake_model.script(ToolCall("launch", {"target": "moon"}), "Launched at the moon.")
    result = run_main(settings, "launch at the moon\ny\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [QUESTION, "Launched at the moon."]
    assert log.read_text() == "moon\n"
    assert tool_result(fake_model) == "launched at moon"


def test_no_reaches_the_model_as_a_denial_and_nothing_runs(setup, fake_model):
    settings, log = setup()
    fake_model.script(ToolCall("launch", {"target": "moon"}), "Understood, not launched.")
    result = run_main(settings, "launch at the moon\nn\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [QUESTION, "Understood, not launched."]
    assert not log.exists()
    assert tool_result(fake_model) == "not run: the user denied launch."


def test_no_answer_in_time_is_a_denial_and_the_user_is_told(setup, fake_model):
    settings, log = setup(approval_timeout_s=1)
    fake_model.script(ToolCall("launch", {"target": "moon"}), "No answer, so no launch.")
    proc = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("launch at the moon\n")
    proc.stdin.flush()
    lines = [proc.stdout.readline().rstrip("\n") for _ in range(3)]  # blocks until printed
    _, stderr = proc.communicate(timeout=60)  # end of input: the CLI stops the kernel
    assert proc.returncode == 0, stderr
    assert lines == [
        QUESTION,
        '(Not answered in time: denied: launch(target="moon"))',
        "No answer, so no launch.",
    ]
    assert not log.exists()
    assert "did not answer the approval question for launch" in tool_result(fake_model)


def test_full_auto_never_asks(setup, fake_model):
    settings, log = setup(profile="full_auto")
    fake_model.script(ToolCall("launch", {"target": "moon"}), "Launched.")
    result = run_main(settings, "launch at the moon\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Launched."]
    assert log.read_text() == "moon\n"


def test_a_deny_rule_never_runs_the_tool(setup, fake_model):
    settings, log = setup(rules=[{"tool": "launch", "action": "deny", "channel": "cli_channel"}])
    fake_model.script(ToolCall("launch", {"target": "moon"}), "Launching is not allowed here.")
    started = time.monotonic()
    result = run_main(settings, "launch at the moon\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Launching is not allowed here."]
    assert not log.exists()
    assert tool_result(fake_model).startswith("denied by policy (rule 1 (launch on cli_channel))")
    assert time.monotonic() - started < 50
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
    assert frames.returncode == 0, frames.stderr
    decisions = [e["payload"]["decision"] for e in json.loads(frames.stdout)]
    assert decisions == ["denied"]
