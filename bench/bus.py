"""Event bus benchmark: the bus against hand-written SQLite ceilings. Prints one JSON object.

(a) one sequential publisher: single-commit inserts (aiosqlite) + batched acks,
    vs. the bus with one no-op subscriber (burst of N publishes, each awaited);
    also publish->handler latency during that burst.
(b) 50 concurrent publishers: a minimal group-commit writer, vs. the bus.
(c) a second topic's handler latency while a 1.5 s handler is busy.
Each measurement runs RUNS times; medians and same-run ratios are reported.

``--check FILE``: the CI gate (``make bench-gate``, ADR 0071). The bus's ratios
to its ceilings, (a) ``a_ratio`` and (b) ``b_ratio_end_to_end``, must reach the
floors under ``bus`` in FILE (``bench/budgets.json``); each attempt takes the
median of GATE_ROUNDS paired rounds, and the best of three attempts is judged
(``hooks.gate``, ADR 0038). Ratios need no machine-speed correction.

``--backend postgres``: instead, the scale-out figures of ``bus_postgres.py``
(1, 2 and 4 worker processes on PostgreSQL next to one process on SQLite).

The ceilings store exactly what the bus stores for one subscriber — the
event row, a delivery row, and its ack — in the bus's own schema (so the
ratio measures the bus's overhead, not a cheaper table layout). ``*_bare_*``
ceilings insert event rows only, into a table without secondary indexes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiosqlite

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.events import Event, EventBus, SQLiteJournal
from core.events.sqlite_batch import SCHEMA as BUS_SCHEMA

RUNS = 3
GATE_ROUNDS = 5  # paired rounds per gate attempt: one slow ceiling or bus run moves no median
RATIOS = ("a_ratio", "b_ratio_end_to_end")  # the gated figures (floors in budgets.json "bus")
BURST = 3000
PUBLISHERS = 50
PER_PUBLISHER = 400
ACK_BATCH = 100
PRAGMAS = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
BARE_SCHEMA = "CREATE TABLE events (id INTEGER PRIMARY KEY, topic TEXT, source TEXT,"
BARE_SCHEMA += " payload TEXT, correlation_id TEXT, idempotency_key TEXT, created_at REAL);"
INSERT = (
    "INSERT INTO events (topic, source, payload, correlation_id, idempotency_key, created_at)"
    " VALUES (?, ?, ?, NULL, NULL, ?)"
)
DELIVER = (
    "INSERT INTO deliveries (event_id, subscriber_id, status, attempt, updated_at)"
    " VALUES (?, 'sub', 'inflight', 1, 0)"
)
ACK = (
    "UPDATE deliveries SET status = 'done', error = NULL, updated_at = 0"
    " WHERE event_id = ? AND subscriber_id = 'sub' AND status = 'inflight'"
)
PAYLOAD = json.dumps({"text": "hello", "n": 1})


async def _raw_db(path: Path, bare: bool) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, isolation_level=None)
    await db.executescript(PRAGMAS + (BARE_SCHEMA if bare else BUS_SCHEMA))
    return db


async def ceiling_sequential(path: Path, n: int, bare: bool = False) -> float:
    """Events/s: event (+ delivery) insert and commit per event, acks in batches of ACK_BATCH."""
    db = await _raw_db(path, bare)
    acks: list[tuple[int]] = []
    t0 = time.perf_counter()
    for _ in range(n):
        await db.execute("BEGIN")
        cur = await db.execute(INSERT, ("bench.a", "bench", PAYLOAD, time.time()))
        if not bare:
            await db.execute(DELIVER, (cur.lastrowid,))
        await db.commit()
        acks.append((cur.lastrowid or 0,))
        if len(acks) >= ACK_BATCH and not bare:
            await db.execute("BEGIN")
            await db.executemany(ACK, acks)
            await db.commit()
            acks = []
    elapsed = time.perf_counter() - t0
    await db.close()
    return n / elapsed


async def ceiling_group_commit(
    path: Path, publishers: int, per_publisher: int, bare: bool = False
) -> float:
    """Events/s: concurrent publishers, one writer committing whatever is queued
    (events, their deliveries, and the acks of the previous batch) in one transaction."""
    db = await _raw_db(path, bare)
    acks: list[tuple[int]] = []
    queue: list[tuple[tuple[Any, ...], asyncio.Future[int]]] = []
    wake = asyncio.Event()
    total = publishers * per_publisher

    def write(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[int]:
        conn.execute("BEGIN IMMEDIATE")
        ids = [conn.execute(INSERT, row).lastrowid or 0 for row in rows]
        if not bare:
            conn.executemany(DELIVER, [(i,) for i in ids])
            conn.executemany(ACK, acks)
            acks[:] = [(i,) for i in ids]  # acked in the next batch, as a subscriber would
        conn.execute("COMMIT")
        return ids

    async def writer() -> None:
        done = 0
        while done < total:
            await wake.wait()
            wake.clear()
            batch, queue[:] = list(queue), []
            ids = await db._execute(write, db._conn, [row for row, _ in batch])
            for (_, fut), event_id in zip(batch, ids, strict=True):
                fut.set_result(event_id)
            done += len(batch)

    async def publisher() -> None:
        loop = asyncio.get_running_loop()
        for _ in range(per_publisher):
            fut: asyncio.Future[int] = loop.create_future()
            queue.append((("bench.b", "bench", PAYLOAD, time.time()), fut))
            wake.set()
            await fut

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(writer())
        for _ in range(publishers):
            tg.create_task(publisher())
    elapsed = time.perf_counter() - t0
    await db.close()
    return total / elapsed


async def bus_sequential(path: Path, n: int) -> dict[str, float]:
    bus = EventBus(SQLiteJournal(path))
    sent: dict[int, float] = {}
    latencies: list[float] = []
    done = asyncio.Event()

    async def handler(event: Event) -> None:
        latencies.append(time.perf_counter() - sent[event.payload["n"]])
        if len(latencies) == n:
            done.set()

    bus.subscribe("bench.*", handler, "noop")
    await bus.start()
    t0 = time.perf_counter()
    for i in range(n):
        sent[i] = time.perf_counter()
        await bus.publish("bench.a", "bench", {"text": "hello", "n": i})
    await done.wait()
    elapsed = time.perf_counter() - t0
    await bus.stop()
    latencies.sort()
    return {
        "events_per_s": n / elapsed,
        "latency_p50_ms": latencies[len(latencies) // 2] * 1000,
        "latency_p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


async def bus_concurrent(path: Path, publishers: int, per_publisher: int) -> dict[str, float]:
    bus = EventBus(SQLiteJournal(path))
    total = publishers * per_publisher
    handled = 0
    done = asyncio.Event()

    async def handler(event: Event) -> None:
        nonlocal handled
        handled += 1
        if handled == total:
            done.set()

    async def publisher(p: int) -> None:
        for i in range(per_publisher):
            await bus.publish("bench.b", "bench", {"text": "hello", "n": i, "p": p})

    bus.subscribe("bench.*", handler, "noop")
    await bus.start()
    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for p in range(publishers):
            tg.create_task(publisher(p))
    published = time.perf_counter() - t0
    await done.wait()
    handled_all = time.perf_counter() - t0
    await bus.stop()
    return {"publish_per_s": total / published, "end_to_end_per_s": total / handled_all}


async def slow_neighbour(path: Path) -> float:
    """Seconds from publish to handler on topic B while topic A's handler takes 1.5 s."""
    bus = EventBus(SQLiteJournal(path), stop_timeout_s=5)
    busy = asyncio.Event()
    seen = asyncio.Event()
    handled_at = 0.0

    async def slow(event: Event) -> None:
        busy.set()
        await asyncio.sleep(1.5)

    async def quick(event: Event) -> None:
        nonlocal handled_at
        handled_at = time.perf_counter()
        seen.set()

    bus.subscribe("slow.*", slow, "slow")
    bus.subscribe("quick.*", quick, "quick")
    await bus.start()
    await bus.publish("slow.job", "bench", {})
    await busy.wait()
    t0 = time.perf_counter()
    await bus.publish("quick.job", "bench", {})
    await seen.wait()
    latency = handled_at - t0
    await bus.stop()
    return latency


async def paired_round(d: Path, bus_first: bool) -> dict[str, float]:
    """Both cases once, each bus run next to its ceiling (``bus_first``: the bus
    runs first, so a drift of the machine's speed favours neither side)."""

    async def pair(ceiling: Awaitable[float], bus: Awaitable[dict[str, float]]) -> Any:
        if bus_first:
            measured = await bus
            return await ceiling, measured
        return await ceiling, await bus

    seq_ceiling, seq_bus = await pair(
        ceiling_sequential(d / "ceil_a.db", BURST), bus_sequential(d / "bus_a.db", BURST)
    )
    gc_ceiling, gc_bus = await pair(
        ceiling_group_commit(d / "ceil_b.db", PUBLISHERS, PER_PUBLISHER),
        bus_concurrent(d / "bus_b.db", PUBLISHERS, PER_PUBLISHER),
    )
    return {
        "a_ceiling_events_per_s": seq_ceiling,
        "a_bus_events_per_s": seq_bus["events_per_s"],
        "a_ratio": seq_bus["events_per_s"] / seq_ceiling,
        "a_latency_p50_ms": seq_bus["latency_p50_ms"],
        "a_latency_p99_ms": seq_bus["latency_p99_ms"],
        "b_ceiling_events_per_s": gc_ceiling,
        "b_bus_publish_per_s": gc_bus["publish_per_s"],
        "b_bus_end_to_end_per_s": gc_bus["end_to_end_per_s"],
        "b_ratio_publish": gc_bus["publish_per_s"] / gc_ceiling,
        "b_ratio_end_to_end": gc_bus["end_to_end_per_s"] / gc_ceiling,
    }


async def main() -> None:
    runs: dict[str, list[float]] = {}

    def note(key: str, value: float) -> None:
        runs.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory() as tmp:
        for run in range(RUNS):
            d = Path(tmp) / f"run{run}"
            d.mkdir()
            for key, value in (await paired_round(d, run % 2 == 1)).items():
                note(key, value)
            note(
                "a_ceiling_bare_events_per_s",
                await ceiling_sequential(d / "bare_a.db", BURST, True),
            )
            gc_bare = await ceiling_group_commit(d / "bare_b.db", PUBLISHERS, PER_PUBLISHER, True)
            note("b_ceiling_bare_events_per_s", gc_bare)
            note("b_ratio_end_to_end_vs_bare", runs["b_bus_end_to_end_per_s"][-1] / gc_bare)
            note("c_other_topic_latency_ms", await slow_neighbour(d / "bus_c.db") * 1000)
    result: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "runs": RUNS,
        "burst": BURST,
        "publishers": PUBLISHERS,
        "events_concurrent": PUBLISHERS * PER_PUBLISHER,
    }
    result.update({k: round(statistics.median(v), 3) for k, v in runs.items()})
    result["targets_met"] = {
        "a_ratio_ge_0.5": result["a_ratio"] >= 0.5,
        "a_p99_lt_10ms": result["a_latency_p99_ms"] < 10,
        "b_ratio_ge_0.5": result["b_ratio_end_to_end"] >= 0.5,
        "c_lt_100ms": result["c_other_topic_latency_ms"] < 100,
    }
    print(json.dumps(result))


def measure_ratios(rounds: int = GATE_ROUNDS) -> dict[str, float]:
    """The gate's figures: medians over ``rounds`` paired rounds (alternating which
    side runs first) of the ceilings, the bus and the ratios of each round."""

    async def run() -> dict[str, list[float]]:
        runs: dict[str, list[float]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(rounds):
                d = Path(tmp) / f"round{n}"
                d.mkdir()
                for key, value in (await paired_round(d, n % 2 == 1)).items():
                    runs.setdefault(key, []).append(value)
        return runs

    runs = asyncio.run(run())
    return {key: round(statistics.median(values), 3) for key, values in runs.items()}


def check(budget_file: Path) -> int:
    """``make bench-gate``: the ratios must reach ``bus`` in ``budget_file`` (ADR 0071),
    judged with the gates' loop (``hooks.gate``: best of three attempts, ADR 0038)."""
    from hooks import gate_file

    return gate_file(budget_file, "bus", measure_ratios, "bench/bus.py", (), RATIOS)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--check", type=Path, metavar="FILE", help="fail below these ratios")
    args = parser.parse_args()
    if args.check is not None:
        sys.exit(check(args.check))
    elif args.backend == "postgres":
        from bus_postgres import main as scale_out

        asyncio.run(scale_out())
    else:
        asyncio.run(main())
