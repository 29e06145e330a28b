"""The bus's throughput is gated (issue 41 item 3, ADR 0071): ``make bench-gate``
runs ``bench/bus.py --check``, whose ratios to the same run's SQLite ceilings
must reach the floors in ``bench/budgets.json`` in one of three attempts, so a
bus that slides to half its speed fails CI instead of going unnoticed."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bench import bus as bus_bench
from bench.hooks import GATE_ATTEMPTS, gate

ROOT = Path(__file__).resolve().parents[2]
# medians this machine measured for today's bus (ADR 0071), and the same bus at half speed
MEASURED = {"a_ratio": 0.98, "b_ratio_end_to_end": 0.62}
SLID = {figure: round(value / 2, 3) for figure, value in MEASURED.items()}


def _budgets() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads((ROOT / "bench" / "budgets.json").read_text())
    return stored


@pytest.fixture
def reference_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate's yardstick (a child process embedding text) is not what is tested here."""
    machine = types.ModuleType("machine")
    machine.slowness = lambda _reference: 1.0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "machine", machine)


def test_bench_gate_runs_the_bus_gate_with_the_issues_floors() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^bench-gate:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert target is not None, "Makefile: no bench-gate target"
    assert "$(BIN)/python bench/bus.py --check bench/budgets.json" in target.group(1)
    floors = _budgets()["bus"]
    assert floors["a_ratio"] >= 0.7  # sequential publisher: bus ÷ one commit per event
    assert floors["b_ratio_end_to_end"] >= 0.55  # 50 publishers: bus ÷ group commit
    assert set(floors) == set(bus_bench.RATIOS)


@pytest.mark.usefixtures("reference_speed")
def test_a_bus_at_half_speed_fails_every_attempt_and_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    attempts: list[int] = []

    def measure() -> dict[str, float]:
        attempts.append(1)
        return dict(SLID)

    budgets = _budgets()
    failed = gate(measure, budgets["bus"], "bench/bus.py", (), 1.0, bus_bench.RATIOS)

    assert failed == 1
    assert len(attempts) == GATE_ATTEMPTS
    out = capsys.readouterr().out
    assert f"bench/bus.py: a_ratio = {SLID['a_ratio']} is below its floor" in out
    assert f"b_ratio_end_to_end = {SLID['b_ratio_end_to_end']} is below its floor" in out


@pytest.mark.usefixtures("reference_speed")
def test_the_bus_as_measured_passes_on_the_first_good_attempt() -> None:
    runs = iter([dict(SLID), dict(MEASURED), dict(SLID)])  # one noisy attempt first
    budgets = _budgets()

    assert gate(lambda: next(runs), budgets["bus"], "bench/bus.py", (), 1.0, bus_bench.RATIOS) == 0
    assert next(runs) == SLID  # the third attempt was never needed


def test_a_ratio_is_a_floor_while_a_time_stays_a_ceiling() -> None:
    from bench.hooks import check_budgets

    said: list[str] = []
    budgets = {"a_ratio": 0.7, "turn_added_ms_p50": 1.0}
    figures = {"a_ratio": 0.9, "turn_added_ms_p50": 0.5}

    def check(**changed: float) -> int:
        return check_budgets({**figures, **changed}, budgets, said.append, "b", ("a_ratio",))

    assert check() == 0
    assert check(a_ratio=1.5) == 0  # faster than the ceiling is no excess
    assert check(a_ratio=0.5) == 1
    assert check(turn_added_ms_p50=2) == 1
    assert said == [
        "b: a_ratio = 0.5 is below its floor 0.7",
        "b: turn_added_ms_p50 = 2 exceeds its budget 1.0",
    ]
