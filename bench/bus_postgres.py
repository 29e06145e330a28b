"""Scale-out benchmark: the bus on PostgreSQL with 1, 2 and 4 worker processes,
next to one process on SQLite. Prints one JSON object (``bench/bus.py --backend
postgres`` prints the same).

Workload, the same on every backend: one shared subscriber (``bench-sub``,
concurrency 8 per process) whose handler burns ``WORK_MS`` of CPU, as a
handler that parses and routes a message would. Two phases per setup:

- ``burst``: ``PUBLISHERS`` concurrent publishers journal ``BURST`` events as
  fast as they can; throughput is events handled per second, first publish to
  last handler.
- ``paced``: ``PACED`` events at ``PACED_RATE`` per second; latency is
  publish (the event's ``created_at``) to handler start, p50 and p99.

The publishers run in this process (no subscriber of its own on PostgreSQL,
so every event crosses to a worker process through NOTIFY and a SKIP LOCKED
claim). PostgreSQL is ``HEARTH_TEST_POSTGRES_DSN`` or the local server; a
fresh database is created and dropped. Without a server the JSON says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.events import Event, EventBus, SQLiteJournal
from core.events.pg_journal import PostgresJournal

WORKERS = (1, 2, 4)
CONCURRENCY = 8
WORK_MS = 2.0
BURST = 3000
PUBLISHERS = 20
PACED = 300
PACED_RATE = 50.0  # below every setup's capacity: latency, not queueing
SERVERS = ("postgresql://root@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/test")


def burn(ms: float) -> None:
    """CPU work of about ``ms`` milliseconds (hashing), the handler's own cost."""
    deadline = time.perf_counter() + ms / 1000
    data = b"hearth"
    while time.perf_counter() < deadline:
        data = hashlib.sha256(data).digest()


class Tally:
    """Handler side: latency of each first attempt, count, time of the last one."""

    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = {"burst": [], "paced": []}
        self.last_at = 0.0

    async def handle(self, event: Event) -> None:
        self.latencies[event.payload["phase"]].append(time.time() - event.created_at)
        burn(WORK_MS)
        self.last_at = time.time()


async def worker(dsn: str) -> None:
    """One worker process: handle ``bench.work`` until ``bench.stop``, then report."""
    tally = Tally()
    stop = asyncio.Event()

    async def on_stop(event: Event) -> None:
        stop.set()

    bus = EventBus(PostgresJournal(dsn), poll_interval_s=1.0)
    bus.subscribe("bench.work", tally.handle, "bench-sub", concurrency=CONCURRENCY)
    bus.subscribe("bench.stop", on_stop, f"bench-stop-{os.getpid()}")
    await bus.start()
    print("ready", flush=True)
    await stop.wait()
    await bus.stop()
    print(json.dumps({"latencies": tally.latencies, "last_at": tally.last_at}), flush=True)


async def publish_phases(bus: EventBus, handled: Any) -> dict[str, float]:
    """Run both phases through ``bus``; ``handled()`` counts events handled so far."""
    per = BURST // PUBLISHERS

    async def publisher(p: int) -> None:
        for n in range(per):
            await bus.publish("bench.work", "bench", {"phase": "burst", "p": p, "n": n})

    t0 = time.time()
    async with asyncio.TaskGroup() as tg:
        for p in range(PUBLISHERS):
            tg.create_task(publisher(p))
    published = time.time() - t0
    while await handled() < per * PUBLISHERS:
        await asyncio.sleep(0.05)
    burst_s = time.time() - t0
    for n in range(PACED):
        due = t0 + burst_s + 0.5 + n / PACED_RATE
        await asyncio.sleep(max(0.0, due - time.time()))
        await bus.publish("bench.work", "bench", {"phase": "paced", "n": n})
    while await handled() < per * PUBLISHERS + PACED:
        await asyncio.sleep(0.05)
    return {"burst_s": burst_s, "publish_per_s": per * PUBLISHERS / published}


def summary(timing: dict[str, float], burst: list[float], paced: list[float]) -> dict[str, Any]:
    paced_ms = sorted(x * 1000 for x in paced)
    burst_ms = sorted(x * 1000 for x in burst)
    return {
        "events_per_s": round(len(burst) / timing["burst_s"], 1),
        "publish_per_s": round(timing["publish_per_s"], 1),
        "burst_latency_p99_ms": round(burst_ms[int(len(burst_ms) * 0.99)], 2),
        "latency_p50_ms": round(statistics.median(paced_ms), 2),
        "latency_p99_ms": round(paced_ms[int(len(paced_ms) * 0.99)], 2),
    }


async def run_sqlite() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        tally = Tally()
        bus = EventBus(SQLiteJournal(Path(tmp) / "e.db"))
        bus.subscribe("bench.work", tally.handle, "bench-sub", concurrency=CONCURRENCY)
        await bus.start()

        async def handled() -> int:
            return sum(len(v) for v in tally.latencies.values())

        timing = await publish_phases(bus, handled)
        await bus.stop()
    return summary(timing, tally.latencies["burst"], tally.latencies["paced"])


async def run_postgres(dsn: str, workers: int) -> dict[str, Any]:
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--worker", dsn, stdout=subprocess.PIPE
        )
        for _ in range(workers)
    ]
    for child in children:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"bench worker did not start: {line!r}")
    bus = EventBus(PostgresJournal(dsn))
    await bus.start()
    counter = await asyncpg.connect(dsn)

    async def handled() -> int:
        sql = "SELECT count(*) FROM journal_deliveries WHERE status = 'done'"
        return int(await counter.fetchval(sql))

    timing = await publish_phases(bus, handled)
    await counter.close()
    await bus.publish("bench.stop", "bench", {})
    reports = []
    for child in children:
        out, _ = await asyncio.wait_for(child.communicate(), 60)
        reports.append(json.loads(out.decode().strip().splitlines()[-1]))
    await bus.stop()
    burst = [x for r in reports for x in r["latencies"]["burst"]]
    paced = [x for r in reports for x in r["latencies"]["paced"]]
    result = summary(timing, burst, paced)
    result["handled_per_worker"] = [len(r["latencies"]["burst"]) for r in reports]
    return result


async def durable_commit_ms(dsn: str, n: int = 300) -> dict[str, float]:
    """The server's floor: p50/p99 of one tiny durable INSERT and COMMIT (fsync)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE bench_floor (x integer)")
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            async with conn.transaction():
                await conn.execute("INSERT INTO bench_floor VALUES (1)")
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        await conn.close()
    times.sort()
    return {"p50_ms": round(times[n // 2], 2), "p99_ms": round(times[int(n * 0.99)], 2)}


async def find_server() -> str | None:
    env = os.environ.get("HEARTH_TEST_POSTGRES_DSN")
    for dsn in [env] if env else SERVERS:
        try:
            conn = await asyncpg.connect(dsn, timeout=3)
        except (OSError, TimeoutError, asyncpg.PostgresError):
            continue
        await conn.close()
        return dsn
    return None


async def main() -> None:
    result: dict[str, Any] = {
        "cores": os.cpu_count(),
        "handler_work_ms": WORK_MS,
        "concurrency_per_process": CONCURRENCY,
        "burst": BURST,
        "publishers": PUBLISHERS,
        "paced_events": PACED,
        "paced_rate_per_s": PACED_RATE,
        "sqlite_1_process": await run_sqlite(),
    }
    server = await find_server()
    if server is None:
        result["postgres"] = "skipped: no PostgreSQL reachable (set HEARTH_TEST_POSTGRES_DSN)"
        print(json.dumps(result))
        return
    admin = await asyncpg.connect(server)
    try:
        for n in WORKERS:  # each setup on a fresh, empty database
            name = f"hearth_bench_{secrets.token_hex(4)}"
            await admin.execute(f'CREATE DATABASE "{name}"')
            parts = urlsplit(server)
            dsn = urlunsplit(parts._replace(path=f"/{name}", query="sslmode=disable"))
            try:
                if "postgres_durable_commit" not in result:
                    result["postgres_durable_commit"] = await durable_commit_ms(dsn)
                result[f"postgres_{n}_workers"] = await run_postgres(dsn, n)
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
    runs = [result[f"postgres_{n}_workers"] for n in WORKERS]
    result["targets_met"] = {
        "postgres_p99_lt_20ms": all(r["latency_p99_ms"] < 20 for r in runs),
        "throughput_grows_with_processes": runs[1]["events_per_s"] > runs[0]["events_per_s"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(worker(sys.argv[2]))
    else:
        asyncio.run(main())
