"""Kernel overhead per turn, startup time and memory (issue 3).

Prints one JSON object:
- ``turn_overhead_ms``: channel receive → reply delivered, minus the time spent
  inside the model (a zero-latency scripted model), median and p90: everything
  Hearth and the SDK do around the model, history reads and writes included
  (whether the SDK or the kernel does them: ADR 0014 moved them out of
  ``Runner.run``). ``turn_total_ms``: the whole receive → delivered time.
- ``startup_s`` / ``import_agents_s`` / ``startup_ratio``: ``main.py`` spawn → the
  "kernel ready" log line, against a bare ``python -c "import agents"`` (medians
  of runs interleaved in the same session).
- ``rss_mb``: resident memory of the kernel at ready with every bundled extension.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from procfs import status_mb  # noqa: E402  (bench/, the script's own directory)

TURNS = 300
STARTS = 5


async def measure_turns(tmp: Path) -> dict[str, float]:
    import yaml
    from agents.testing import ModelStep, ScriptedModel, assistant_message

    from support.ext_files import grant_all
    from support.harness import CAPTURE_CHANNEL, running_kernel

    ext_dir = tmp / "ext" / "capture"
    ext_dir.mkdir(parents=True)
    (ext_dir / "manifest.yaml").write_text(
        "id: capture\nname: Capture\nentrypoint: main:Ext\npermissions: {user_messages: true}\n"
    )
    (ext_dir / "main.py").write_text(CAPTURE_CHANNEL)
    grant_all(tmp / "ext", tmp / "data")  # an in-process extension needs the user's grant
    settings = tmp / "settings.yaml"
    settings.write_text(
        yaml.safe_dump(
            {
                "paths": {"extensions": str(tmp / "ext"), "data": str(tmp / "data")},
                "isolation": {
                    "default": "inprocess"
                },  # its extensions run in the kernel (ADR 0086)
                "channels": {"default": "capture"},
                "logging": {"level": "WARNING"},
            }
        )
    )
    model = ScriptedModel([ModelStep(output=[assistant_message("ok")]) for _ in range(TURNS + 20)])

    inside: list[float] = []
    real_get_response = model.get_response

    async def timed_get_response(*args, **kwargs):
        start = time.perf_counter()
        try:
            return await real_get_response(*args, **kwargs)
        finally:
            inside.append(time.perf_counter() - start)

    model.get_response = timed_get_response  # type: ignore[method-assign]
    overheads: list[float] = []
    totals: list[float] = []
    async with running_kernel(settings, model=model) as kernel:
        channel = kernel.loader.instance("capture")
        delivered = asyncio.Event()

        async def send_to_user(user_id: str, message: str) -> None:
            delivered.set()

        channel.send_to_user = send_to_user
        for i in range(TURNS + 20):
            delivered.clear()
            start = time.perf_counter()
            await channel.say(f"message {i}", user_id=f"user{i % 4}")
            await asyncio.wait_for(delivered.wait(), timeout=10)
            total = time.perf_counter() - start
            if i >= 20:  # warm-up
                overheads.append((total - inside[-1]) * 1000)
                totals.append(total * 1000)
    return {
        "turn_overhead_ms_p50": round(statistics.median(overheads), 3),
        "turn_overhead_ms_p90": round(statistics.quantiles(overheads, n=10)[-1], 3),
        "turn_total_ms_p50": round(statistics.median(totals), 3),
    }


def time_import_agents() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import agents"], check=True)
    return time.perf_counter() - start


def time_kernel_start(tmp: Path) -> tuple[float, float]:
    """Spawn → "kernel ready" on stderr; also RSS at that moment (MB)."""
    settings = tmp / "start.yaml"
    settings.write_text(f"paths: {{data: {tmp / 'start-data'}}}\nlogging: {{level: INFO}}\n")
    env = {**os.environ, "HEARTH_SUPERVISED": "1"}  # no CLI channel: stay up until told
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), "--settings", str(settings)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    elapsed = float("nan")
    rss = float("nan")
    for line in proc.stderr:
        if "kernel ready" in line:
            elapsed = time.perf_counter() - start
            rss = status_mb(proc.pid)
            break
    proc.terminate()
    proc.communicate(timeout=30)
    return elapsed, rss


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hearth-bench-") as tmp_name:
        tmp = Path(tmp_name)
        turns = asyncio.run(measure_turns(tmp))
        imports, starts, rss = [], [], []
        for _ in range(STARTS):
            imports.append(time_import_agents())
            started, mem = time_kernel_start(tmp)
            starts.append(started)
            rss.append(mem)
    result = {
        **turns,
        "import_agents_s": round(statistics.median(imports), 3),
        "startup_s": round(statistics.median(starts), 3),
        "startup_ratio": round(statistics.median(starts) / statistics.median(imports), 2),
        "rss_mb": round(statistics.median(rss), 1),
        "turns": TURNS,
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
