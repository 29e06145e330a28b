"""Kernel cost of answer post-processors (issue 15, ADR 0023).

Prints one JSON object, medians and p99 in microseconds over one run:
- ``parse_plain_us``: a message with no ``#`` (every ordinary turn pays this);
- ``parse_tags_us``: ``… #json:minimal #decision #extract #classify`` with the
  activations cached (the usual case after a conversation's first message);
- ``run_builtins_us``: the four built-ins on a 1,300-character answer,
  serially, with their progress events published to an in-memory sink
  (the bus's own cost is ``bench/bus.py``'s).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.extensions.contract import TurnContext  # noqa: E402
from core.kernel.postprocess import PostProcessing  # noqa: E402

ITERATIONS = 2000
TURN = TurnContext(channel_id="bench", user_id="u", session_id="bench:u", turn_id="1@1.0")
ANSWER = (
    "Status of DW_PROD and DW_DEV:\n- CPU: 94%\n- Memory: 87.5 GB (87.5% of capacity)\n"
    "The nightly load hit an outage: disk usage exceeded the limit. We recommend more space. "
) * 8


class Sink:
    async def publish(self, topic: str, source: str, payload: dict[str, Any], **_: Any) -> int:
        return 0


async def timed(step: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    samples = []
    for _ in range(ITERATIONS):
        started = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return {
        "p50": round(statistics.median(samples), 1),
        "p99": round(samples[-len(samples) // 100], 1),
    }


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        post = PostProcessing.build(Path(tmp) / "sessions.db", Sink())
        await post.open()
        tagged = "How are the warehouses? #json:minimal #decision #extract #classify"
        query = await post.parse(tagged, TURN)  # the first read of the activations
        figures = {
            "parse_plain_us": await timed(lambda: post.parse("How are the warehouses?", TURN)),
            "parse_tags_us": await timed(lambda: post.parse(tagged, TURN)),
            "run_builtins_us": await timed(
                lambda: post.finish(query, ANSWER, "answered", None, TURN)
            ),
            "answer_chars": len(ANSWER),
        }
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
