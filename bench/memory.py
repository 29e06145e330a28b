"""Memory benchmark: recall and the context provider over 100,000 stored facts.

Loads the bundled ``memory`` extension through a real kernel (loader, context,
data dir in a temp directory), bulk-loads synthetic facts in one transaction,
then times ``recall`` (what the tool runs) and ``get_context`` (what every
turn runs) for QUERIES varied questions. Prints one JSON object (ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.extensions.contract import TurnContext  # noqa: E402
from core.kernel.runner import Kernel  # noqa: E402
from core.settings import load_settings  # noqa: E402

FACTS = int(os.environ.get("BENCH_MEMORY_FACTS", "100000"))
QUERIES = 500
SEED = 7

RELATIONS = (
    "sister brother mother father aunt uncle cousin friend neighbour colleague boss "
    "dentist doctor teacher coach landlord partner son daughter niece nephew grandmother "
    "grandfather roommate mentor accountant lawyer plumber hairdresser vet"
).split()
VERBS = (
    "likes loves prefers hates collects plays visits studies teaches owns drives cooks "
    "reads paints builds repairs sells buys grows watches writes rents"
).split()
PLACES = (
    "Lisbon Porto Berlin Munich Paris Lyon Madrid Seville Rome Milan Vienna Prague Warsaw "
    "Oslo Bergen Dublin Cork London Leeds Boston Denver Austin Seattle Toronto Montreal "
    "Kyoto Osaka Seoul Busan Sydney Perth Auckland Lima Quito Bogota Santiago"
).split()
SYLLABLES = "ka lo mi re su to va ne di po ra li mo ze tu fa gi ho ju be".split()


def words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(n)]


def vocabulary(rng: random.Random) -> dict[str, list[str]]:
    return {"names": words(rng, 400), "things": words(rng, 3000), "hobbies": words(rng, 800)}


def fact(rng: random.Random, vocab: dict[str, list[str]]) -> str:
    rel, name = rng.choice(RELATIONS), rng.choice(vocab["names"]).title()
    thing, hobby = rng.choice(vocab["things"]), rng.choice(vocab["hobbies"])
    return rng.choice(
        (
            f"The user's {rel} {name} {rng.choice(VERBS)} {thing} and lives in "
            f"{rng.choice(PLACES)}.",
            f"{name}, the user's {rel}, has a birthday on day {rng.randint(1, 28)} "
            f"of month {rng.randint(1, 12)} and enjoys {hobby}.",
            f"The user {rng.choice(VERBS)} {thing} every {rng.choice(('week', 'month'))} "
            f"with {name} in {rng.choice(PLACES)}.",
            f"Note: {thing} is stored in the {hobby} box; {name} knows the code.",
        )
    )


def question(rng: random.Random, vocab: dict[str, list[str]]) -> str:
    return rng.choice(
        (
            f"Where does my {rng.choice(RELATIONS)} {rng.choice(vocab['names']).title()} live?",
            f"What does {rng.choice(vocab['names']).title()} like?",
            f"When is my {rng.choice(RELATIONS)}'s birthday?",
            f"Can you remind me who knows the code for the {rng.choice(vocab['hobbies'])} box?",
            f"I am flying to {rng.choice(PLACES)} next week, anything I should know?",
            "Thanks, that's all for now!",
        )
    )


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(pick(0.99), 3),
        "max_ms": round(ordered[-1], 3),
    }


async def timed(calls: list[Any]) -> list[float]:
    samples = []
    for make in calls:
        t0 = time.perf_counter()
        await make()
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


async def main() -> dict[str, Any]:
    rng = random.Random(SEED)
    vocab = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        shutil.copytree(ROOT / "sandbox" / "extensions" / "memory", tmp_path / "ext" / "memory")
        settings_path = tmp_path / "settings.yaml"
        settings_path.write_text(
            yaml.safe_dump(
                {
                    "paths": {"extensions": str(tmp_path / "ext"), "data": str(tmp_path / "data")},
                    "models": {"default": None},
                    "logging": {"level": "WARNING"},
                }
            )
        )
        kernel = Kernel(load_settings(settings_path))
        await kernel.start()
        try:
            memory = kernel.loader.instance("memory")
            now = time.time()
            facts = [(fact(rng, vocab), "bench", now - i) for i in range(FACTS)]
            t0 = time.perf_counter()
            await memory.store.insert_many(facts)
            build_s = time.perf_counter() - t0
            questions = [question(rng, vocab) for _ in range(QUERIES)]
            turn = TurnContext(channel_id="bench", user_id="u1")
            await timed([lambda q=q: memory.recall(q) for q in questions[:20]])  # warm-up
            recall = await timed([lambda q=q: memory.recall(q) for q in questions])
            context = await timed([lambda q=q: memory.get_context(q, turn) for q in questions])
            sample = await memory.get_context(questions[0], turn)
            stored = await memory.store.count()
        finally:
            await kernel.stop()
    return {
        "memories": stored,
        "queries": QUERIES,
        "build_s": round(build_s, 2),
        "recall": percentiles(recall),
        "context_provider": percentiles(context),
        "context_chars_max": len(sample or ""),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
