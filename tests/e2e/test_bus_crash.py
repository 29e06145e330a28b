"""Crash safety of the event bus, with real processes killed by SIGKILL."""

from __future__ import annotations

import collections
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.events.journal import PROCESS_DIED
from support.bus_helpers import JournalFactory

CHILD = Path(__file__).parents[1] / "support" / "bus_crash_child.py"
KILLS = 3
BURST = 1500


def _lines(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split()]


def _run_child(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=timeout
    )


def _kill_mid_burst(args: list[str], published: Path, seen_before: int) -> None:
    """Start a burst child and SIGKILL it once it has published a few hundred events."""
    child = subprocess.Popen([sys.executable, str(CHILD), *args], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60  # against a hang only: test workers share the cores
    try:
        while len(_lines(published)) < seen_before + BURST // 4:
            if child.poll() is not None:
                err = child.stderr.read().decode() if child.stderr else ""
                pytest.fail(f"burst child exited early ({child.returncode}): {err}")
            if time.monotonic() > deadline:
                pytest.fail("burst child published too slowly")
            time.sleep(0.005)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL


def test_sigkill_mid_burst_loses_no_published_event(
    make_journal: JournalFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal, handled, published = (
        make_journal.location,
        tmp_path / "handled",
        tmp_path / "published",
    )
    for kill in range(KILLS):
        args = ["burst", str(journal), str(handled), str(published), f"round{kill}", str(BURST)]
        _kill_mid_burst(args, published, len(_lines(published)))

    done = _run_child("drain", str(journal), str(handled))
    assert done.returncode == 0, done.stderr

    returned = set(_lines(published))
    handled_counts = collections.Counter(_lines(handled))
    lost = returned - set(handled_counts)
    duplicates = sum(n - 1 for n in handled_counts.values())
    with capsys.disabled():
        print(
            f"\n[bus crash test, {make_journal.backend}] kills={KILLS} published={len(returned)} "
            f"handled={len(handled_counts)} lost={len(lost)} duplicates={duplicates}"
        )
    assert len(returned) >= KILLS * BURST // 4
    assert not lost, f"{len(lost)} events whose publish returned were never handled"


async def test_event_that_keeps_killing_the_process_is_dead_lettered(
    make_journal: JournalFactory, tmp_path: Path
) -> None:
    journal, handled = make_journal.location, tmp_path / "handled"
    max_attempts = 3
    kills = 0
    for _ in range(max_attempts + 2):
        result = _run_child("poison", str(journal), str(handled), str(max_attempts))
        if result.returncode == 0:
            break
        assert result.returncode == -signal.SIGKILL, result.stderr
        kills += 1
    else:
        pytest.fail("the poison event was never dead-lettered")

    assert kills == max_attempts
    dead = await make_journal().dead_letters()
    assert [(d.topic, d.attempt, d.error) for d in dead] == [
        ("crash.poison", max_attempts, PROCESS_DIED)
    ]
    records = await make_journal().recent_events(topic="crash.innocent")
    assert len(records) == 3
    assert all(r.deliveries[0].status == "done" for r in records)
    assert len(set(_lines(handled))) == 3
