"""Kernel overhead of the turn hooks (issue 13, seed 003 "Performance gates").

Prints one JSON object, medians and p99 from one run:
- ``turn_ms`` (a) no hook extensions and (b) 10 extensions with 50 no-op
  hooks in total: channel receive → reply delivered, minus the time inside
  the (zero-latency, scripted) model; ``turn_added_ms_p50`` = (b) − (a) and
  ``turn_ratio_p50`` = (b) / (a). The two kernels run interleaved, in blocks,
  so drift on a loaded machine hits both alike.
- ``tool_us`` (c) one tool call through the interception path: the bare
  tool, the tool with one in-process no-op ``before_tool_call`` +
  ``after_tool_call``, and with the same hooks in an isolated extension;
  ``tool_added_us_p50_inprocess`` and ``tool_added_ms_p50_isolated``.

``--fast`` runs fewer iterations (the CI gate); ``--check FILE`` compares
the figures with the budgets in FILE (``bench/budgets.json``) and exits 1
naming each one exceeded. Budgets are only ever tightened.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

NOOP_HOOKS = """
from core.extensions.sdk import BaseExtension


class Ext(BaseExtension):
    async def on_turn_start(self, turn):
        return None

    async def on_turn_end(self, turn, outcome):
        return None

    async def on_input_messages(self, messages, turn):
        return None

    async def on_plain_text(self, text, direction, turn):
        return None

    async def on_llm_output(self, output, turn):
        return None
"""

TOOL_HOOKS = """
from core.extensions.sdk import BaseExtension


class Ext(BaseExtension):
    async def before_tool_call(self, call, turn):
        return None

    async def after_tool_call(self, call, result, turn):
        return None
"""


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def write_setup(tmp: Path, name: str, extensions: dict[str, tuple[str, dict[str, Any]]]) -> Path:
    """A settings file and an extensions dir (granted) with a capture channel plus ``extensions``."""
    import yaml

    from conftest import grant_all
    from harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST

    ext_root = tmp / name / "ext"
    data = tmp / name / "data"
    specs = {"capture": (CAPTURE_CHANNEL, CAPTURE_MANIFEST), **extensions}
    for ext_id, (code, manifest) in specs.items():
        ext_dir = ext_root / ext_id
        ext_dir.mkdir(parents=True)
        full = {"id": ext_id, "name": ext_id, "entrypoint": "main:Ext", **manifest}
        (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(full))
        (ext_dir / "main.py").write_text(code)
    grant_all(ext_root, data)
    settings = tmp / name / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "paths": {"extensions": str(ext_root), "data": str(data)},
                "channels": {"default": "capture"},
                "logging": {"level": "WARNING"},
                "models": {"default": None},
            }
        )
    )
    return settings


class TurnProbe:
    """A running kernel whose turns are timed without the model's own time."""

    def __init__(self, kernel: Any, inside: list[float]) -> None:
        self.kernel = kernel
        self.inside = inside
        self.channel = kernel.loader.instance("capture")
        self.delivered = asyncio.Event()

        async def send_to_user(user_id: str, message: str) -> None:
            self.delivered.set()

        self.channel.send_to_user = send_to_user
        self.count = 0

    async def turn(self) -> float:
        self.delivered.clear()
        self.count += 1
        start = time.perf_counter()
        await self.channel.say(f"message {self.count}", user_id=f"user{self.count % 4}")
        await asyncio.wait_for(self.delivered.wait(), timeout=10)
        return (time.perf_counter() - start - self.inside[-1]) * 1000


def timed_model(turns: int) -> tuple[Any, list[float]]:
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    model = ScriptedModel([ModelStep(output=[assistant_message("ok")]) for _ in range(turns)])
    inside: list[float] = []
    real = model.get_response

    async def get_response(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return await real(*args, **kwargs)
        finally:
            inside.append(time.perf_counter() - start)

    model.get_response = get_response  # type: ignore[method-assign]
    return model, inside


async def measure_turns(tmp: Path, turns: int, blocks: int) -> dict[str, Any]:
    from harness import running_kernel

    bare = write_setup(tmp, "a", {})
    hooked = write_setup(tmp, "b", {f"noop{i}": (NOOP_HOOKS, {}) for i in range(10)})
    total = turns * blocks + 40
    model_a, inside_a = timed_model(total)
    model_b, inside_b = timed_model(total)
    samples: dict[str, list[float]] = {"a": [], "b": []}
    async with running_kernel(bare, model=model_a) as kernel_a:
        async with running_kernel(hooked, model=model_b) as kernel_b:
            hooks = sum(len(kernel_b.hook_registry.at(p)) for p in _points())
            assert hooks == 50, f"expected 50 no-op hooks, found {hooks}"
            probes = {"a": TurnProbe(kernel_a, inside_a), "b": TurnProbe(kernel_b, inside_b)}
            for probe in probes.values():  # warm-up
                for _ in range(20):
                    await probe.turn()
            for _ in range(blocks):
                for name, probe in probes.items():
                    samples[name].extend([await probe.turn() for _ in range(turns)])
    a50, b50 = statistics.median(samples["a"]), statistics.median(samples["b"])
    return {
        "turn_ms": {
            name: {
                "p50": round(statistics.median(values), 3),
                "p99": round(percentile(values, 0.99), 3),
            }
            for name, values in samples.items()
        },
        "turn_added_ms_p50": round(b50 - a50, 3),
        "turn_ratio_p50": round(b50 / a50, 3),
        "turns_each": turns * blocks,
    }


def _points() -> list[Any]:
    from core.extensions.capabilities import HOOKS

    return sorted(HOOKS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer iterations (the CI gate)")
    parser.add_argument("--check", type=Path, metavar="FILE", help="fail past these budgets")
    args = parser.parse_args()
    turns, blocks = (40, 3) if args.fast else (100, 5)
    with tempfile.TemporaryDirectory(prefix="hearth-bench-hooks-") as tmp_name:
        tmp = Path(tmp_name)
        result: dict[str, Any] = asyncio.run(measure_turns(tmp, turns, blocks))
    result["cpu_count"] = os.cpu_count()
    print(json.dumps(result))
    if args.check is not None:
        sys.exit(check_budgets(result, json.loads(args.check.read_text())["hooks"], print))


def check_budgets(
    result: dict[str, Any], budgets: dict[str, float], say: Callable[[str], None]
) -> int:
    """0 when every budgeted figure is within its budget, else 1 (each excess said)."""
    failed = 0
    for name, budget in budgets.items():
        value = result.get(name)
        if value is None:
            continue
        if value > budget:
            say(
                f"bench/hooks.py: {name} = {value} exceeds its budget {budget}",
            )
            failed = 1
    return failed


if __name__ == "__main__":
    main()
