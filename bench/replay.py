"""What recording turns for replay costs (issue 20, ADR 0033, ADR 0052).

Runs bench/turn.py's turn measurement (a capture channel, a zero-latency
scripted model, 300 turns after warm-up) with ``replay.record`` off and on,
alternating, three rounds each, and prints one JSON object: the kernel's
overhead per turn (median of the rounds' p50 and p90) both ways and what
recording adds. On a shared machine that difference drowns in noise, so it
also measures the recorder alone (``recorder_ms_p50``): a turn's start, one
model call through the recording wrapper and the turn's end, with a history
of ``HISTORY_ITEMS`` items, the journal a no-op (what the recorder itself
costs on the event loop; ``recorder_publishes_per_turn``: what it journals).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from turn import measure_turns  # noqa: E402  (bench/turn.py; it sets up sys.path for tests)

ROUNDS = 3
HISTORY_ITEMS = 150  # a conversation near turns.history_max_items (200)
RECORDED_TURNS = 600


def _one(record: bool) -> dict[str, float]:
    os.environ["HEARTH__REPLAY__RECORD"] = "true" if record else "false"
    with tempfile.TemporaryDirectory(prefix="hearth-bench-replay-") as tmp:
        return asyncio.run(measure_turns(Path(tmp)))


class _NoJournal:
    """A frame sink that journals nothing (counts what it is given)."""

    published = 0

    async def publish(self, *args: object, **kwargs: object) -> int:
        self.published += 1
        return self.published


async def recorder_cost() -> dict[str, float]:
    """The recorder's own time per turn (median, ms) and its publishes per turn."""
    from agents import ModelSettings
    from agents.models.interface import ModelTracing
    from agents.testing import ScriptedModel, assistant_message

    from core.extensions.access.state_scope import serving
    from core.extensions.contract import TurnContext, TurnOutcome
    from core.replay.recording import ReplayRecorder

    sink = _NoJournal()
    recorder = ReplayRecorder(sink)
    history: list[dict[str, object]] = []
    for i in range(HISTORY_ITEMS // 2):
        history.append({"role": "user", "content": f"message {i} about the weather"})
        history.append({"role": "assistant", "content": f"answer {i}: it is sunny"})
    steps = [[assistant_message("ok")] for _ in range(2 * RECORDED_TURNS)]
    inner = ScriptedModel(steps)
    wrapped = recorder.wrap_model(ScriptedModel(steps))
    instructions = "You are Hearth, the user's personal assistant. " * 60  # about 3 KB

    async def ask(model: object, given: list[dict[str, object]]) -> float:
        start = time.perf_counter()
        await model.get_response(  # type: ignore[attr-defined]
            instructions,
            given,
            ModelSettings(),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        return time.perf_counter() - start

    bare: list[float] = []
    observed: list[float] = []
    for i in range(RECORDED_TURNS):
        turn = TurnContext(channel_id="c", user_id="u", session_id="c:u", turn_id=f"{i}@1.0")
        given = [*history, {"role": "user", "content": f"message {i}"}]
        bare.append(await ask(inner, given))
        with serving(turn):
            start = time.perf_counter()
            recorder.turn_started(turn, f"message {i}")
            recorder.history_given(turn, history)
            spent = time.perf_counter() - start
            spent += await ask(wrapped, given)
            start = time.perf_counter()
            await recorder.turn_ended(turn, TurnOutcome("answered", "ok", 1.0))
            observed.append(spent + time.perf_counter() - start)
    baseline = statistics.median(bare[100:])
    return {
        "recorder_ms_p50": round((statistics.median(observed[100:]) - baseline) * 1000, 3),
        "recorder_publishes_per_turn": round(sink.published / RECORDED_TURNS, 2),
    }


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
                **asyncio.run(recorder_cost()),
                "history_items": HISTORY_ITEMS,
                "rounds": ROUNDS,
                "cores": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
