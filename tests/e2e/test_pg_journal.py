"""What the PostgreSQL journal adds: several processes on one database.

The bus suites (test_bus_*.py) already run every guarantee on both journals;
here: processes sharing one subscriber handle each event exactly once, a
killed process's work is finished by the others, a live one's is never taken,
and NOTIFY wakes an idle process without polling.
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.config import EventsSettings, StorageSettings
from core.events import EventBus, JournalError
from core.events.pg_journal import PostgresJournal
from support.bus_helpers import Recorder, eventually, wait_for

CHILD = Path(__file__).parents[1] / "support" / "bus_crash_child.py"
MAIN = Path(__file__).resolve().parents[2] / "main.py"


def _serve(dsn: str, tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    handled, ready = tmp_path / f"{name}.handled", tmp_path / f"{name}.ready"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "serve", dsn, str(handled), str(ready)],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if child.poll() is not None:
            err = child.stderr.read().decode() if child.stderr else ""
            pytest.fail(f"serve child exited early ({child.returncode}): {err}")
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail("serve child did not subscribe within 30 s")
        time.sleep(0.02)
    return child, handled


def _handled(*files: Path) -> list[tuple[int, str]]:
    lines = []
    for file in files:
        if file.exists():
            for line in file.read_text().splitlines():
                pid, _, rest = line.partition(" ")
                lines.append((int(pid), rest))
    return lines


def _stop(*children: subprocess.Popen[bytes]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait()


async def _until(condition, within: float, what: str) -> None:  # type: ignore[no-untyped-def]
    await wait_for(condition, within=within, what=what)


async def test_two_processes_sharing_a_subscriber_handle_each_event_once(
    postgres_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, first_file = _serve(postgres_dsn, tmp_path, "first")
    second, second_file = _serve(postgres_dsn, tmp_path, "second")
    publisher = EventBus(PostgresJournal(postgres_dsn))
    try:
        await publisher.start()
        ids = set()
        for n in range(400):
            ids.add(await publisher.publish("share.job", "test", {"n": n}))
        await _until(
            lambda: len(_handled(first_file, second_file)) >= len(ids), 60, "every event handled"
        )
        await asyncio.sleep(0.5)  # room for a second handling to show up
        handled = _handled(first_file, second_file)
    finally:
        await publisher.stop()
        _stop(first, second)
    counts = collections.Counter(int(event) for _, event in handled)
    by_process = collections.Counter(pid for pid, _ in handled)
    with capsys.disabled():
        print(f"\n[pg share] events={len(ids)} handled per process={dict(by_process)}")
    assert set(counts) == ids
    assert max(counts.values()) == 1, "an event was handled twice"
    assert set(by_process) == {first.pid, second.pid}, "one process did all the work"


async def test_a_killed_process_work_is_finished_by_the_other(
    postgres_dsn: str, tmp_path: Path
) -> None:
    doomed, doomed_file = _serve(postgres_dsn, tmp_path, "doomed")
    children = [doomed]
    publisher = EventBus(PostgresJournal(postgres_dsn))
    await publisher.start()
    try:
        stuck = await publisher.publish("share.turn", "test", {"hang_in": doomed.pid})
        await _until(
            lambda: (doomed.pid, f"hang {stuck}") in _handled(doomed_file),
            30,
            "the doomed process to be mid-turn",
        )
        survivor, survivor_file = _serve(postgres_dsn, tmp_path, "survivor")
        children.append(survivor)
        await asyncio.sleep(0.5)
        assert _handled(survivor_file) == [], "a live process's turn was taken"
        _stop(doomed)
        # the survivor's heartbeat finds the dead PID on this host and takes the turn back
        await _until(
            lambda: (survivor.pid, str(stuck)) in _handled(survivor_file),
            30,
            "the survivor to finish the killed process's turn",
        )

        async def acked() -> list[tuple[str, int]]:
            record = (await publisher.journal.recent_events(limit=1))[0]
            found = [(d.status, d.attempt) for d in record.deliveries]
            return found if found != [("inflight", 2)] else []

        assert await eventually(acked) == [("done", 2)]
    finally:
        await publisher.stop()
        _stop(*children)


async def test_a_process_starting_never_takes_a_live_process_delivery(
    postgres_dsn: str,
) -> None:
    release = asyncio.Event()
    first_calls: list[int] = []
    second = Recorder()

    async def slow(event) -> None:  # type: ignore[no-untyped-def]
        first_calls.append(event.id)
        await release.wait()

    bus = EventBus(PostgresJournal(postgres_dsn))
    bus.subscribe("turn.*", slow, "agent")
    await bus.start()
    other = EventBus(PostgresJournal(postgres_dsn), poll_interval_s=0.05)
    try:
        event_id = await bus.publish("turn.run", "t", {})
        await _until(lambda: first_calls == [event_id], 5, "the first process's turn")
        other.subscribe("turn.*", second, "agent")  # same subscriber, another process
        await other.start()
        await asyncio.sleep(0.5)  # ten polls of the newcomer
        assert second.ids == []
        release.set()
        await _until(lambda: bus.queue_depth() == 0, 5, "the turn to end")
    finally:
        await other.stop()
        await bus.stop()
    assert first_calls == [event_id]
    counts = await PostgresJournal(postgres_dsn).counts()
    assert (counts["done"], counts["inflight"], counts["pending"]) == (1, 0, 0)


async def test_notify_wakes_an_idle_process_without_polling(postgres_dsn: str) -> None:
    listener = EventBus(PostgresJournal(postgres_dsn), poll_interval_s=60)
    rec = Recorder()
    listener.subscribe("ping.*", rec, "pong")
    await listener.start()
    publisher = EventBus(PostgresJournal(postgres_dsn), poll_interval_s=60)
    await publisher.start()
    try:
        latencies = []
        for _ in range(20):
            t0 = time.perf_counter()
            event_id = await publisher.publish("ping.x", "elsewhere", {})
            await wait_for(lambda eid=event_id: eid in rec.times, within=5)  # type: ignore[misc]
            latencies.append(rec.times[event_id] - t0)
    finally:
        await publisher.stop()
        await listener.stop()
    # polling is once a minute here: only NOTIFY can explain these (bounds for a loaded machine)
    assert statistics.median(latencies) < 0.2, latencies
    assert max(latencies) < 1.0, latencies


def test_storage_backend_postgres_gives_the_bus_a_postgres_journal() -> None:
    storage = StorageSettings(
        backend="postgres", postgres_dsn="postgresql://h@db/x", process_lease_s=9
    )
    bus = EventBus.from_settings(Path("unused.db"), EventsSettings(), storage)
    assert isinstance(bus.journal, PostgresJournal)
    assert bus.journal.lease_s == 9


async def test_unreachable_database_is_a_clear_error() -> None:
    bus = EventBus(PostgresJournal("postgresql://hearth:secret@127.0.0.1:1/hearth"))
    with pytest.raises(JournalError, match=r"hearth:\*\*\*@127.0.0.1:1.*cannot connect"):
        await bus.start()


async def test_main_py_events_reads_the_postgres_journal(postgres_dsn: str, tmp_path: Path) -> None:
    bus = EventBus(PostgresJournal(postgres_dsn))
    event_id = await bus.publish("note.saved", "notes", {"text": "hi"})
    await bus.stop()
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"storage: {{backend: postgres, postgres_dsn: '{postgres_dsn}'}}\n")
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(MAIN), "events", "--json", "--settings", str(settings)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["id"], r["topic"], r["payload"]) for r in rows] == [
        (event_id, "note.saved", {"text": "hi"})
    ]
