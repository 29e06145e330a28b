"""The floor bench's load case is judged against a floor with Hearth's HTTP transport
(issue 42, ADR 0055's amendment): the bare SDK turn behind a minimal Starlette
endpoint served by uvicorn, so the ratio measures what Hearth adds, not the
transport the bare floor never carried."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from bench.hooks import GATE_ATTEMPTS, gate

ROOT = Path(__file__).resolve().parents[2]
TRANSPORT_RATIOS = ("load_transport_wall_ratio", "load_transport_p99_ratio")


@pytest.fixture
def floor_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/floor.py``, whose import sets the API token it serves with: the token is
    put back as it was after the test."""
    monkeypatch.setenv("HEARTH_API_TOKEN", "restored-after-the-test")
    return importlib.import_module("bench.floor")


@pytest.fixture
def reference_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's yardstick (a child process embedding text) is not what is tested here."""
    machine = types.ModuleType("machine")
    machine.slowness = lambda _reference: 1.0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "machine", machine)


def _floor_budgets() -> dict[str, float]:
    stored: dict[str, Any] = json.loads((ROOT / "bench" / "budgets.json").read_text())
    budgets: dict[str, float] = stored["floor"]
    return budgets


def test_the_transport_ratios_are_gated_no_looser_than_the_bare_floors() -> None:
    budgets = _floor_budgets()
    assert budgets["load_transport_wall_ratio"] <= budgets["load_wall_ratio"]
    assert budgets["load_transport_p99_ratio"] <= budgets["load_p99_ratio"]


@pytest.mark.usefixtures("reference_speed")
def test_hearth_slower_than_its_budget_over_the_transport_floor_fails_the_gate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    budgets = _floor_budgets()
    within = {figure: round(value * 0.8, 3) for figure, value in budgets.items()}
    slow = {**within, "load_transport_wall_ratio": 2.5}  # every other figure within budget

    assert gate(lambda: dict(slow), budgets, "bench/floor.py", (), 1.0) == 1
    out = capsys.readouterr().out
    assert out.count('"attempt"') == GATE_ATTEMPTS
    assert "bench/floor.py: load_transport_wall_ratio = 2.5 exceeds its budget" in out
    assert gate(lambda: dict(within), budgets, "bench/floor.py", (), 1.0) == 0


async def test_the_transport_floor_serves_the_bare_turn_over_http(
    floor_bench: ModuleType,
) -> None:
    asked: list[tuple[str, str]] = []

    class BareTurn:  # the SDK's turn as the floor runs it; the model is not what is tested
        async def bare_turn(self, conversation: str, text: str) -> str:
            asked.append((conversation, text))
            return f"echo: {text}"

    async with (
        floor_bench.floor_server(BareTurn()) as port,
        floor_bench.http_client(port) as client,
    ):
        await floor_bench.post_chat(client, "c1", "hello")  # checks the answer's text
        response = await client.post(
            "/v1/chat/completions",
            json={"model": "hearth", "user": "c1", "messages": [{"role": "user", "content": "x"}]},
        )
        served_by = response.headers.get("server")

    assert asked == [("c1", "hello"), ("c1", "x")]
    assert response.json()["object"] == "chat.completion"
    assert served_by == "uvicorn"
    with pytest.raises(httpx.TransportError):  # the server is gone with its context
        async with floor_bench.http_client(port) as client:
            await client.get("/")
