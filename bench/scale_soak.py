"""A reduced scale-out soak on PostgreSQL (issue 34, ADR 0039): one ``channels``
kernel and two ``workers`` as real ``main.py`` processes on a fresh database, the
channels kernel started first; while messages arrive, a worker is SIGKILLed every
8–15 s (and restarted at once, as its supervisor would), the channels kernel once.
Prints one JSON object: kills, messages, answered, lost, duplicated, out of order.

The channel (a test extension) journals one message every ``INTERVAL_S`` to one of
``USERS`` users, continuing after a restart where it left off, and appends every
reply it is asked to send to a file. The model is the fake OpenAI server (it echoes
after ``MODEL_DELAY_S``, so kills land mid-turn). Out of order: a user's replies
not in the order of that user's messages. Bounded: ``SEND_S`` of traffic, then at
most ``DRAIN_S`` to answer what is left.

    .venv/bin/python bench/scale_soak.py [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.ext_files import ext_code  # noqa: E402
from support.fake_openai import FakeOpenAIServer  # noqa: E402
from support.pg_helpers import fresh_database, run_sync  # noqa: E402
from support.scale_support import CHANNEL_ID, CHANNEL_MANIFEST, REPLY_SINK, Cluster  # noqa: E402

USERS = 4
INTERVAL_S = 0.3
SEND_S = 55.0
DRAIN_S = 40.0
MODEL_DELAY_S = 1.0
KILL_EVERY_S = (8.0, 15.0)

SOAK_CHANNEL = ext_code(
    header="import asyncio\nimport json\nimport os",
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
        self.task = None
    async def start(self):
        self.task = asyncio.create_task(self._send())
    async def stop(self):
        if self.task is not None:
            self.task.cancel()
    async def _send(self):
        progress = self.ctx.get_config("progress")
        total, users = self.ctx.get_config("total"), self.ctx.get_config("users")
        interval = self.ctx.get_config("interval")
        i = int(open(progress).read()) if os.path.exists(progress) else 0
        while i < total:
            user = f"u{i % users}"
            await self.ctx.on_user_message(f"m{i}", user, idempotency_key=f"msg-{i}")
            i += 1
            with open(progress, "w") as f:
                f.write(str(i))
            await asyncio.sleep(interval)
"""
    + REPLY_SINK,
)


def soak(seed: int, keep: Path | None = None) -> dict[str, object]:
    rng = random.Random(seed)
    dsn, drop = fresh_database()
    total = int(SEND_S / INTERVAL_S)
    kills = {"workers": 0, "channels": 0}
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(delay_s=MODEL_DELAY_S) as srv:
        root = keep or Path(tmp)
        ext_root = root / "extensions"
        (ext_root / CHANNEL_ID).mkdir(parents=True)
        manifest = {"id": CHANNEL_ID, "name": CHANNEL_ID, "version": "1.0.0"}
        manifest |= {"entrypoint": "main:Ext", **CHANNEL_MANIFEST}
        (ext_root / CHANNEL_ID / "manifest.yaml").write_text(json.dumps(manifest))
        (ext_root / CHANNEL_ID / "main.py").write_text(SOAK_CHANNEL)
        cluster = Cluster(root, ext_root, dsn, srv)
        config = {
            "out": str(cluster.out),
            "progress": str(root / "progress"),
            "total": total,
            "users": USERS,
            "interval": INTERVAL_S,
        }
        for name, role in (("front", "channels"), ("w1", "workers"), ("w2", "workers")):
            cluster.settings_for(name, role, extensions={CHANNEL_ID: config})
        try:
            cluster.start("front", "channels")  # first, alone on the fresh database
            cluster.wait_log("front", "kernel ready", 90)
            time.sleep(2.0)  # messages journaled before any worker ever ran
            for name in ("w1", "w2"):
                cluster.start(name, "workers")
            started = time.monotonic()
            channels_killed = False
            while time.monotonic() - started < SEND_S:
                time.sleep(rng.uniform(*KILL_EVERY_S))
                victim = rng.choice(["w1", "w2"])
                cluster.kill(victim)
                kills["workers"] += 1
                cluster.start(victim, "workers")
                if not channels_killed and time.monotonic() - started > SEND_S / 2:
                    cluster.kill("front")
                    kills["channels"] += 1
                    channels_killed = True
                    cluster.start("front", "channels")
            deadline = time.monotonic() + DRAIN_S + SEND_S  # the sender may lag behind
            while time.monotonic() < deadline:
                if _progress(root) >= total and len(_answered(cluster)) >= total:
                    break
                time.sleep(0.5)
        finally:
            cluster.stop_all()
            elapsed = time.monotonic() - started
        sent = _progress(root)
        replies = cluster.replies()
        logs = "".join(cluster.log(name) for name in ("front", "w1", "w2"))
    rerun = run_sync(lambda: _rerun(dsn))
    drop()
    return _score(replies, sent, kills, elapsed) | {
        "router_deliveries_taken_back": rerun,
        "turns_given_back": logs.count("runs first"),
    }


async def _rerun(dsn: str) -> int:
    """Router deliveries claimed again after their worker was killed (running or prefetched)."""
    conn = await asyncpg.connect(dsn)
    try:
        query = (
            "SELECT count(*) FROM journal_deliveries"
            " WHERE subscriber_id = 'kernel.router' AND attempt > 1"
        )
        return int(await conn.fetchval(query))
    finally:
        await conn.close()


def _progress(root: Path) -> int:
    path = root / "progress"
    return int(path.read_text() or 0) if path.exists() else 0


def _answered(cluster: Cluster) -> set[str]:
    return {r["text"] for r in cluster.replies()}


def _score(
    replies: list[dict[str, str]], sent: int, kills: dict[str, int], elapsed: float
) -> dict[str, object]:
    texts = [r["text"].removeprefix("echo: ") for r in replies]
    counts: dict[str, int] = {}
    for text in texts:
        counts[text] = counts.get(text, 0) + 1
    messages = [f"m{i}" for i in range(sent)]
    out_of_order = 0
    for user in range(USERS):
        order = [int(r["text"].removeprefix("echo: m")) for r in replies if r["user"] == f"u{user}"]
        out_of_order += sum(1 for a, b in pairwise(order) if b < a)
    return {
        "seconds": round(elapsed, 1),
        "kills": kills,
        "messages": sent,
        "answered": sum(1 for m in messages if m in counts),
        "lost": sum(1 for m in messages if m not in counts),
        "duplicated": sum(1 for n in counts.values() if n > 1),
        "out_of_order": out_of_order,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--keep", type=Path, help="an empty directory to keep the logs in")
    args = parser.parse_args()
    print(json.dumps(soak(args.seed, args.keep)))


if __name__ == "__main__":
    main()
