"""A turn late in a long conversation against one early in it (issue 42).

A Telegram chat is one conversation for months: a turn must cost the same at
the 250th turn as at the 10th. One process, one event loop, the scripted model
server (``tests/support/fake_openai.py``) in a thread, a kernel with every
bundled extension that runs without an outside service (``floor.py``'s set
plus ``postprocessors``, ``webhook``, ``simple_agent``, ``builder_agent``) and a
capture channel standing in for Telegram.

One conversation is first taken to ``OLD_TURNS`` turns (its stored history
compacted as settings say: ``turns.history_max_items``); then ``ROUNDS`` rounds
each take, in rotating order, one turn of that old conversation, one turn of a
young conversation (turns 5–15 of a fresh one, replaced when it grows up) and
the same two for the floor: the bare SDK's ``Runner.run`` with the plain
``AsyncOpenAI`` client, its history a list (for the old turn, as many items as
Hearth's last old turn sent: the SDK alone keeps no budget). Drift on a loaded
machine hits all four alike. A turn's cost is its wall time minus the model
server's time answering it (which grows with the prompt, as a real model's
does). Prints one JSON object: ``young_ms_p50`` / ``old_ms_p50`` (Hearth, turn
~10 and ~250), ``ratio`` (old ÷ young), the floor's two medians
and ratio, the items the model received at the old turns, ``rss_mb`` (this
process, after the first 40 turns, every extension loaded and used),
``rss_settled_mb`` (the same once the memory extension's background work — its
embedding model loading, the turns embedded — has settled; not with ``--fast``),
``rss_end_mb`` (after the last round) and the core count.

``--profile`` writes two cProfile tables (stderr): 30 young turns, 30 old turns,
sorted by cumulative time. ``--fast`` runs fewer rounds (the CI gate);
``--check FILE`` judges ``ratio`` against ``long_conversation`` in FILE
(``bench/budgets.json``) with the gates' loop (``hooks.gate``, ADR 0038).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import floor  # noqa: E402  (sets sys.path, the API token and the tracing switch)
from procfs import status_mb  # noqa: E402

EXTRA = ("postprocessors", "webhook", "simple_agent", "builder_agent")
OLD_TURNS = 240
YOUNG_FROM, YOUNG_TO = 5, 15
RSS_AFTER = 40
FLOOR_SETUP = floor.write_setup


def rss_mb() -> float:
    """This process's resident memory, MB to one decimal (as the JSON reports it)."""
    return round(status_mb(), 1)


def every_bundled(tmp: Path, base_url: str, port: int) -> Path:
    """``floor.write_setup`` plus the other bundled extensions that need no outside service."""
    from support.ext_files import grant_all

    settings = FLOOR_SETUP(tmp, base_url, port)
    for ext_id in EXTRA:
        shutil.copytree(
            ROOT / "sandbox" / "extensions" / ext_id,
            tmp / "ext" / ext_id,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    grant_all(tmp / "ext", tmp / "data")
    return settings


class ModelClock:
    """Time the model server spent answering (``FakeOpenAIServer.timings``: from the
    first byte of the request's body read to its answer sent — reading and parsing
    the request, which a real server does in its own process, and counting the
    prompt's tokens: it grows with the conversation as a real model's prompt
    processing does, and is not Hearth's)."""

    model: Any = None
    seen = 0

    @classmethod
    def spent_since_last(cls) -> float:
        timings = cls.model.timings if cls.model is not None else []
        spent = sum(seconds for _, seconds in timings[cls.seen :])
        cls.seen = len(timings)
        return spent * 1000


class Conversation:
    """One conversation on one path: its name and how many turns it has taken."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.turns = 0

    async def take(self, turn: floor.Turn) -> float:
        """The turn's cost in ms: its wall time minus the model server's time in it."""
        self.turns += 1
        ModelClock.spent_since_last()
        wall = await floor.timed(turn, self.name, f"{self.name} message {self.turns}")
        return wall - ModelClock.spent_since_last()


class Young:
    """Conversations kept between their turns ``YOUNG_FROM`` and ``YOUNG_TO``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.born = 0
        self.current = Conversation(f"{prefix}0")

    async def take(self, turn: floor.Turn) -> float:
        if self.current.turns >= YOUNG_TO:
            self.born += 1
            self.current = Conversation(f"{self.prefix}{self.born}")
        while self.current.turns < YOUNG_FROM - 1:
            await self.current.take(turn)
        return await self.current.take(turn)


def pairs(name: str, items: int) -> list[dict[str, str]]:
    """A conversation of ``items`` plain items, as the SDK's ``to_input_list`` keeps it."""
    history = []
    for i in range(items // 2):
        history.append({"role": "user", "content": f"{name} message {i}"})
        history.append({"role": "assistant", "content": f"echo: {name} message {i}"})
    return history


async def settled_rss(limit_s: float = 60.0) -> float:
    """RSS once the memory extension's background work after the turns (its model
    loaded in a worker thread, the turns embedded) has stopped moving it: no change
    of more than 1 MB over 5 s, or ``limit_s``."""
    last, since, start = rss_mb(), time.monotonic(), time.monotonic()
    while time.monotonic() - start < limit_s:
        await asyncio.sleep(0.5)
        now = rss_mb()
        if abs(now - last) > 1.0:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 5.0:
            break
    return last


async def measure_rounds(
    paths: floor.Paths, model: Any, rounds: int, settle: bool
) -> dict[str, Any]:
    ModelClock.model = model
    old, young = Conversation("old"), Young("young")
    floor_young = Young("floor-young")
    # None until measured (--fast does not wait for memory's background work): JSON null, not NaN
    rss: float | None = None
    settled: float | None = None
    sent = 0
    for i in range(OLD_TURNS):
        await old.take(paths.cli)
        sent = len(model._requests[-1]["messages"])
        model._requests.clear()  # the fake server keeps every request otherwise
        if i + 1 == RSS_AFTER:
            rss = rss_mb()
            settled = await settled_rss() if settle else settled
    times: dict[str, list[float]] = {}
    received: list[int] = []

    floor_old = Conversation("floor-old")

    async def floor_old_turn() -> float:
        # the bare SDK sending as many items as Hearth's old turn did (the SDK keeps no
        # budget of its own: its whole list would grow without end)
        paths.histories["floor-old"] = pairs("floor-old", sent)
        return await floor_old.take(paths.floor)

    async def hearth_old() -> float:
        nonlocal sent
        ms = await old.take(paths.cli)
        sent = len(model._requests[-1]["messages"])
        received.append(sent)
        return ms

    runs = {
        "hearth_young": lambda: young.take(paths.cli),
        "hearth_old": hearth_old,
        "floor_young": lambda: floor_young.take(paths.floor),
        "floor_old": floor_old_turn,
    }
    order = list(runs)
    for _ in range(rounds):
        order = order[1:] + order[:1]
        for name in order:
            times.setdefault(name, []).append(await runs[name]())
            model._requests.clear()
    p50 = {key: statistics.median(values) for key, values in times.items()}
    return {
        "young_ms_p50": round(p50["hearth_young"], 3),
        "old_ms_p50": round(p50["hearth_old"], 3),
        "ratio": round(p50["hearth_old"] / p50["hearth_young"], 3),
        "floor_young_ms_p50": round(p50["floor_young"], 3),
        "floor_old_ms_p50": round(p50["floor_old"], 3),
        "floor_ratio": round(p50["floor_old"] / p50["floor_young"], 3),
        "old_turns": f"{OLD_TURNS + 1}-{OLD_TURNS + rounds}",
        "young_turns": f"{YOUNG_FROM}-{YOUNG_TO}",
        "old_messages_sent_p50": statistics.median(received),
        "rss_mb": rss,
        "rss_settled_mb": settled,
        "rss_end_mb": rss_mb(),
        "rss_after_turns": RSS_AFTER,
    }


def measure(fast: bool) -> dict[str, Any]:
    rounds = 30 if fast else 80
    floor.write_setup = every_bundled  # with_kernel writes this setup
    result = asyncio.run(floor.with_kernel(lambda p, m: measure_rounds(p, m, rounds, not fast)))
    result["cpu_count"] = os.cpu_count()
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return result


def profile(turns: int = 30, top: int = 40, dump: str | None = None) -> str:
    out = io.StringIO()

    async def work(paths: floor.Paths, model: Any) -> dict[str, Any]:
        conversation = Conversation("p")
        for stage, until in (("young", 10 + turns), ("old", OLD_TURNS + turns)):
            while conversation.turns < until - turns:
                await conversation.take(paths.cli)
            profiler = cProfile.Profile()
            start = time.perf_counter()
            profiler.enable()
            while conversation.turns < until:
                await conversation.take(paths.cli)
            profiler.disable()
            elapsed = (time.perf_counter() - start) * 1000 / turns
            print(f"== {stage}: {elapsed:.1f} ms per turn", file=out)
            stats = pstats.Stats(profiler, stream=out)
            if dump:
                stats.dump_stats(f"{dump}.{stage}")
            stats.strip_dirs().sort_stats("cumulative").print_stats(top)
        return {}

    floor.write_setup = every_bundled
    asyncio.run(floor.with_kernel(work))
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer rounds (the CI gate)")
    parser.add_argument("--check", type=Path, metavar="FILE", help="fail past these budgets")
    parser.add_argument("--profile", action="store_true", help="cProfile young and old turns")
    args = parser.parse_args()
    if args.profile:
        print(profile(dump=os.environ.get("HEARTH_PROFILE_DUMP")), file=sys.stderr)
        return
    if args.check is None:
        print(json.dumps(measure(args.fast)))
        return
    from hooks import gate_file

    name = "bench/long_conversation.py"
    sys.exit(gate_file(args.check, "long_conversation", lambda: measure(True), name))


if __name__ == "__main__":
    main()
