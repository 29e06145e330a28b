"""bench/prompt_cache.py's model server: a server that dies (the prebuilt
llama-server dies with SIGILL on CPUs without AVX-512) is reported in one line
with how it ended and what it last wrote, not as a ProcessLookupError from the
cleanup; ``HEARTH_LLM_SERVER`` picks the server that is started."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from bench.prompt_cache import LLM_TOOLS, ModelServer, server_command

DIES = "sh -c 'echo loading model >&2; echo AMX is not ready to be used! >&2; kill -ILL $$' sh"
# exec: the shell becomes the sleeper, so the process group holds one process
RUNS = "sh -c 'exec sleep 600' sh"


def test_a_server_that_died_is_reported_in_one_line_at_cleanup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HEARTH_LLM_SERVER", DIES)
    server = ModelServer(8089, tmp_path)
    server.proc.wait(30)

    with pytest.raises(RuntimeError, match="ended before it was ready"):
        server.wait_ready()
    server.stop()

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert "ended with signal SIGILL" in lines[0]
    assert "loading model | AMX is not ready to be used!" in lines[0]
    assert lines[0].startswith("bench/prompt_cache.py: the model server (sh -c ")


def test_the_chosen_server_gets_the_model_template_and_one_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_LLM_SERVER", RUNS)
    monkeypatch.setenv("THREADS", "1")
    server = ModelServer(8089, tmp_path)
    try:
        assert server.command[:4] == ["sh", "-c", "exec sleep 600", "sh"]
        command = server.command[4:]  # what start.sh would pass
        assert command[command.index("--port") + 1] == "8089"
        assert command[command.index("-t") + 1] == "1"
        assert command[command.index("-c") + 1] == "16384"
        assert command[command.index("-np") + 1] == "1"
        assert "--jinja" in command
        template = command[command.index("--chat-template-file") + 1]
        assert template.endswith("qwen2.5-fenced-json-tools.jinja")
        assert command[command.index("-m") + 1].endswith("qwen2.5-coder-1.5b-instruct.gguf")
    finally:
        server.stop()
    assert server.proc.returncode == -signal.SIGTERM


def test_without_a_choice_the_shared_start_script_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEARTH_LLM_SERVER", raising=False)
    assert server_command(8089, 2) == ["bash", str(LLM_TOOLS / "start.sh")]
