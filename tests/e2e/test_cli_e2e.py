"""End to end: ``main.py`` as a subprocess, piped stdin, the real ``openai``
client against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROJECT_ROOT
from support.fake_openai import FakeOpenAIServer, ToolCall, models_section

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"


@pytest.fixture
def fake_model():
    with FakeOpenAIServer() as srv:
        yield srv


def run_main(settings: Path, stdin: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_settings(settings_file, ext_root: Path, base_url: str) -> Path:
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    return settings_file(models=models_section(base_url))


def test_piped_chat_with_a_tool_call_over_real_http(settings_file, ext_root, fake_model):
    fake_model.script("Hello from the model.", ToolCall("current_time", {}), "It is time.")
    path = cli_settings(settings_file, ext_root, fake_model.base_url)
    result = run_main(path, "hi\nwhat time is it?\n/nosuch\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Hello from the model.",
        "It is time.",
        "Unknown command /nosuch. Type /help to see the commands.",
    ]
    requests = fake_model.requests
    assert len(requests) == 3
    assert all(r.get("stream") for r in requests)  # the CLI channel streams
    tool_result = requests[2]["messages"][-1]
    assert tool_result["role"] == "tool" and '"now"' in tool_result["content"]
    # history: the second turn saw the first exchange
    contents = [m.get("content") for m in requests[1]["messages"]]
    assert "hi" in contents and "Hello from the model." in contents
    assert "ERROR" not in result.stderr


def test_unreachable_model_gives_an_apology_and_the_kernel_keeps_serving(settings_file, ext_root):
    path = cli_settings(settings_file, ext_root, "http://127.0.0.1:9/v1")  # nothing listens
    result = run_main(path, "hello\n/help\n")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Sorry, I could not get an answer from the model")
    assert "/status" in result.stdout  # /help still answered


def test_no_model_configured_one_line_then_exit(settings_file, ext_root, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    path = settings_file(models={"default": {"provider": "openai", "model": "gpt-5-mini"}})
    result = run_main(path, "hello\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "No model configured" in result.stdout
