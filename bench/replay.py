"""What recording turns for replay costs (issue 20, ADR 0033).

Runs bench/turn.py's turn measurement (a capture channel, a zero-latency
scripted model, 300 turns after warm-up) with ``replay.record`` off and on,
alternating, three rounds each, and prints one JSON object: the kernel's
overhead per turn (median of the rounds' p50 and p90) both ways and what
recording adds.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from turn import measure_turns  # noqa: E402  (bench/turn.py; it sets up sys.path for tests)

ROUNDS = 3


def _one(record: bool) -> dict[str, float]:
    os.environ["HEARTH__REPLAY__RECORD"] = "true" if record else "false"
    with tempfile.TemporaryDirectory(prefix="hearth-bench-replay-") as tmp:
        return asyncio.run(measure_turns(Path(tmp)))


def main() -> None:
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(ROUNDS):
        for record in (False, True):
            runs[record].append(_one(record))
    os.environ.pop("HEARTH__REPLAY__RECORD", None)

    def median(record: bool, key: str) -> float:
        return round(statistics.median(r[key] for r in runs[record]), 3)

    off50, on50 = median(False, "turn_overhead_ms_p50"), median(True, "turn_overhead_ms_p50")
    off90, on90 = median(False, "turn_overhead_ms_p90"), median(True, "turn_overhead_ms_p90")
    print(
        json.dumps(
            {
                "turn_overhead_ms_p50_record_off": off50,
                "turn_overhead_ms_p50_record_on": on50,
                "turn_overhead_ms_p90_record_off": off90,
                "turn_overhead_ms_p90_record_on": on90,
                "record_added_ms_p50": round(on50 - off50, 3),
                "record_ratio_p50": round(on50 / off50, 3) if off50 else None,
                "rounds": ROUNDS,
                "cores": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
