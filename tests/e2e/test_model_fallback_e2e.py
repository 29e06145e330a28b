"""Fallback chains end to end (ADR 0061): ``main.py`` with the terminal channel, and
the HTTP API with the real ``openai`` client, against two scripted model servers
whose first fails each way. The user reads the second model's answer and nothing
else; a 400 is reported and not handed on. ``/status`` names the model that
served and the one cooling down; ``/usage`` and ``main.py usage`` show the
tokens the turn used, under the model that served them, on both backends."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import PROJECT_ROOT
from support.fake_openai import Failure, FakeOpenAIServer, Hang, ScriptItem, closed_port_url
from support.http_api_support import TOKEN, client, install, serving

CLI_EXT = PROJECT_ROOT / "sandbox" / "extensions" / "cli_channel"
SECOND = "Second model here."


def chain_section(first_url: str, second_url: str, **first: Any) -> dict[str, Any]:
    def provider(url: str, **extra: Any) -> dict[str, Any]:
        return {"type": "openai_compatible", "base_url": url, "api_key": "x", **extra}

    return {
        "default": {
            "provider": "first",
            "model": "fake-model",
            "fallbacks": [{"provider": "second", "model": "fake-model"}],
        },
        "providers": {
            "first": provider(first_url, **{"max_retries": 0, **first}),
            "second": provider(second_url, max_retries=0),
        },
        "prices": {"fake-model": {"input": 1.0, "cached_input": 0.1, "output": 4.0}},
    }


# each failure kind: (the first server's script, the first provider's extra fields)
KINDS: dict[str, tuple[list[ScriptItem], dict[str, Any]]] = {
    "refused": ([], {}),
    "hang": ([Hang(30)], {"timeout_s": 2.0}),
    "429": ([Failure(429, "rate limited", retry_after=0.5)] * 2, {"max_retries": 1}),
    "500": ([Failure(500, "model crashed")] * 2, {"max_retries": 1}),
    "400": ([Failure(400, "unknown parameter: temprature")], {}),
}


def run_main(settings: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *args, "--settings", str(settings)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_terminal_gets_the_second_models_answer(kind, settings_file, ext_root):
    script, fields = KINDS[kind]
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(*script)
        second.script(SECOND)
        url = closed_port_url() if kind == "refused" else first.base_url
        path = settings_file(models=chain_section(url, second.base_url, **fields))
        result = run_main(path, stdin="hello\n/status\n/usage\n")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        if kind == "400":
            assert lines[0].startswith("Sorry, I could not get an answer from the model")
            assert "temprature" in lines[0]  # the request's fault, reported
            assert second.requests == []
            return
        assert lines[0] == SECOND  # nothing extra
        assert len(second.requests) == 1
    status = result.stdout
    assert "Last model served: second/fake-model" in status
    assert "Cooling down: first/fake-model" in status
    assert "This conversation:" in status and "This conversation: nothing yet" not in status


def test_main_py_usage_lists_the_model_that_served(settings_file, ext_root, storage_backend):
    shutil.copytree(CLI_EXT, ext_root / "cli_channel")
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(Failure(500, "model crashed"))
        second.script(SECOND, "Again the second.")
        section = chain_section(first.base_url, second.base_url)
        path = settings_file(models=section, storage=storage_backend)
        chat = run_main(path, stdin="hello\nand again\n")
        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.splitlines() == [SECOND, "Again the second."]
        asked = second.requests
    report = run_main(path, "usage", "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    (row,) = data["rows"]  # one day, one person, one model
    assert row["model"] == "second/fake-model" and row["person"] == "owner"
    usage_sent = [r for r in asked]  # the fake server reports prompt tokens = JSON size / 4
    assert row["input_tokens"] == sum(
        max(1, len(json.dumps(r["messages"])) // 4) for r in usage_sent
    )
    expected_cost = (row["input_tokens"] * 1.0 + row["output_tokens"] * 4.0) / 1_000_000
    assert row["cost"] == pytest.approx(expected_cost, rel=1e-6)
    assert data["totals"]["today"]["cost"] == pytest.approx(expected_cost, rel=1e-6)
    table = run_main(path, "usage")
    assert table.returncode == 0, table.stderr
    assert "second/fake-model" in table.stdout and "USD" in table.stdout


@pytest.mark.parametrize("kind", ["refused", "hang", "429", "500", "400"])
async def test_the_http_api_gets_the_second_models_answer(
    kind, monkeypatch, ext_root, settings_file
):
    monkeypatch.setenv("HEARTH_API_TOKEN", TOKEN)
    install(ext_root)
    script, fields = KINDS[kind]
    with FakeOpenAIServer() as first, FakeOpenAIServer() as second:
        first.script(*script)
        second.script(SECOND)
        url = closed_port_url() if kind == "refused" else first.base_url
        path = settings_file(
            models=chain_section(url, second.base_url, **fields),
            channels={"default": "http_api"},
            extensions={"http_api": {"listen": "127.0.0.1:0"}},
        )
        async with serving(path) as (kernel, base):
            started = time.monotonic()
            reply = await client(base).chat.completions.create(
                model="hearth", messages=[{"role": "user", "content": "hello"}], user="alice"
            )
            elapsed = time.monotonic() - started
            text = reply.choices[0].message.content or ""
            health = kernel.model_router.health
            if kind == "400":
                assert text.startswith("Sorry, I could not get an answer from the model")
                assert second.requests == [] and health.cooling("first/fake-model") == 0
                return
            assert text == SECOND
            assert health.last_served == "second/fake-model"
            assert health.cooling("first/fake-model") > 0
            metrics = kernel.metrics.exposition().decode()
    print(f"\nHTTP API fall-over, {kind}: {elapsed:.2f} s")
    assert 'hearth_model_calls_total{model="first/fake-model",outcome="failed"} 1.0' in metrics
    assert 'hearth_model_calls_total{model="second/fake-model",outcome="ok"} 1.0' in metrics
    assert 'hearth_model_cooling_seconds{model="first/fake-model"}' in metrics
    assert 'hearth_model_tokens_total{kind="input",model="second/fake-model"}' in metrics
