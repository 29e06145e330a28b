"""A Hearth turn next to the SDK's own floor (issue 29 part 3, ADR 0055).

One process, one event loop, the scripted model server (``tests/support/fake_openai.py``)
in a thread. A kernel runs with the bundled extensions that give tools (memory,
kv, scheduler), a channel and the ``http_api`` extension. The floor is a bare
``Runner.run`` of the openai-agents SDK with the same instructions, the same
tools and the same kind of model client (an ``AsyncOpenAI`` against the same
server), keeping its conversation in a list as an SDK user without a session
would. Four paths take turns in rotating order so drift on a loaded machine
hits all alike:

- ``floor``: ``Runner.run(agent, history + message)``;
- ``floor_http``: the same bare turn behind the same HTTP transport as Hearth's
  (a minimal Starlette endpoint served by uvicorn on this loop, the same httpx
  client and JSON both ways), ADR 0055's amendment;
- ``cli``: a channel's ``on_user_message`` → reply delivered (what the terminal
  channel does, minus the terminal);
- ``http``: ``POST /v1/chat/completions`` → the JSON reply.

Conversations are five turns long. Prints one JSON object: medians and p90 per
path in ms, ``cli_ratio`` / ``http_ratio`` (Hearth ÷ floor, medians) and
``http_transport_ratio`` (HTTP ÷ floor_http); the concurrent case — 20
conversations × 5 messages at once, the model answering in 200 ms — for the
two floors and the HTTP path: wall time and p99 latency, ``load_wall_ratio`` /
``load_p99_ratio`` against the bare floor and ``load_transport_wall_ratio`` /
``load_transport_p99_ratio`` against ``floor_http`` (median of three
interleaved rounds); the core count and load average.

``--profile N`` prints the top entries of a cProfile of N turns (to stderr)
instead: overall by own time, then Hearth's own modules (the kernel and the
extensions' copies) by cumulative time; ``--path`` says which path (``cli`` by
default). ``--fast`` runs fewer turns (the CI gate); ``--check FILE`` judges the
ratios against ``floor`` in FILE (``bench/budgets.json``) with the gates' loop
(``hooks.gate``, ADR 0038): ratios need no machine-speed correction.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from collections.abc import AsyncIterator, Awaitable, Callable
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

Turn = Callable[[str, str], Awaitable[None]]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def write_setup(tmp: Path, base_url: str, port: int) -> Path:
    from support.ext_files import grant_all
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
        "isolation": {"default": "inprocess"},  # its extensions run in the kernel (ADR 0086)
        "logging": {"level": "WARNING"},
        "models": {
            "default": {"provider": "fake", "model": "fake-model"},
            "providers": {
                "fake": {
                    "type": "openai_compatible",
                    "base_url": base_url,
                    "api_key": "key-of-the-fake-model",
                    "max_retries": 0,
                    "warm": "off",  # the bare SDK it is compared with warms nothing
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
        self.floor_http_client: httpx.AsyncClient | None = None  # set once its server runs

    async def bare_turn(self, conversation: str, text: str) -> str:
        """The SDK's turn with the conversation kept in a list: what both floors run."""
        from agents import Runner

        history = self.histories.get(conversation, [])
        result = await Runner.run(self.agent, [*history, {"role": "user", "content": text}])
        self.histories[conversation] = result.to_input_list()
        return str(result.final_output)

    async def floor(self, conversation: str, text: str) -> None:
        reply = await self.bare_turn(conversation, text)
        assert reply == f"echo: {text}", reply

    async def floor_http(self, conversation: str, text: str) -> None:
        assert self.floor_http_client is not None, "the floor's server is not running"
        await post_chat(self.floor_http_client, conversation, text)

    async def cli(self, conversation: str, text: str) -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.waiting[conversation] = future
        await self.channel.say(text, user_id=conversation)
        reply = await asyncio.wait_for(future, 30)
        assert reply == f"echo: {text}", reply

    async def http_path(self, conversation: str, text: str) -> None:
        await post_chat(self.http, conversation, text)

    def ways(self) -> dict[str, Turn]:
        return {
            "floor": self.floor,
            "floor_http": self.floor_http,
            "cli": self.cli,
            "http": self.http_path,
        }


async def post_chat(http: httpx.AsyncClient, conversation: str, text: str) -> None:
    """One ``POST /v1/chat/completions`` (Hearth's or the floor's), its answer checked."""
    body = {
        "model": "hearth",
        "user": conversation,
        "messages": [{"role": "user", "content": text}],
    }
    response = await http.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    answer = response.json()["choices"][0]["message"]["content"]
    assert answer == f"echo: {text}", answer


def floor_app(paths: Paths) -> Any:
    """The least an SDK user serving the agent over HTTP writes: one Starlette route
    that runs the bare turn and answers in the Chat Completions shape."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat_completions(request: Request) -> JSONResponse:
        body = await request.json()
        reply = await paths.bare_turn(body["user"], body["messages"][-1]["content"])
        message = {"role": "assistant", "content": reply}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return JSONResponse(
            {
                "id": f"chatcmpl-{id(request):x}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "hearth",
                "choices": [choice],
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", chat_completions, methods=["POST"])])


@contextlib.asynccontextmanager
async def floor_server(paths: Paths) -> AsyncIterator[int]:
    """uvicorn with its defaults (the HTTP parser it picks, ``auto``) serving
    ``floor_app`` on this loop, on a socket bound as Hearth's is (TCP, so asyncio
    turns Nagle off); yields the port."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    config = uvicorn.Config(
        floor_app(paths),
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    await server.startup(sockets=[sock])
    task = asyncio.create_task(server.main_loop())
    try:
        yield int(sock.getsockname()[1])
    finally:
        server.should_exit = True
        await task
        await server.shutdown(sockets=[sock])


async def timed(turn: Turn, conversation: str, text: str) -> float:
    start = time.perf_counter()
    await turn(conversation, text)
    return (time.perf_counter() - start) * 1000


async def sequential(paths: Paths, turns: int) -> dict[str, Any]:
    """``turns`` turns per path, interleaved in rotating order, after a warm-up."""
    ways = paths.ways()
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
    transport = statistics.median(times["floor_http"])
    result["http_transport_ratio"] = round(statistics.median(times["http"]) / transport, 3)
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
    """The load case for the HTTP path and both floors, in rotating order per round."""
    model.delay_s = LOAD_LATENCY_S
    ways = {name: paths.ways()[name] for name in ("floor", "floor_http", "http")}
    walls: dict[str, list[float]] = {name: [] for name in ways}
    p99s: dict[str, list[float]] = {name: [] for name in ways}
    order = list(ways)
    try:
        for r in range(LOAD_ROUNDS):
            for name in order:
                wall, p99 = await under_load(ways[name], f"load{r}-{name}-")
                walls[name].append(wall)
                p99s[name].append(p99)
            order = order[1:] + order[:1]
    finally:
        model.delay_s = 0.0
    wall = {name: statistics.median(v) for name, v in walls.items()}
    p99 = {name: statistics.median(v) for name, v in p99s.items()}
    result: dict[str, Any] = {
        "load": f"{LOAD_CONVERSATIONS}x{LOAD_MESSAGES}, {LOAD_LATENCY_S * 1000:g} ms model"
    }
    for name in ways:
        result[f"load_{name}_wall_s"] = round(wall[name], 3)
        result[f"load_{name}_p99_ms"] = round(p99[name], 1)
    for floor, prefix in (("floor", "load"), ("floor_http", "load_transport")):
        result[f"{prefix}_wall_ratio"] = round(wall["http"] / wall[floor], 3)
        result[f"{prefix}_p99_ratio"] = round(p99["http"] / p99[floor], 3)
    return result


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
        async with (
            running_kernel(settings) as kernel,
            http_client(port) as http,
        ):
            await wait_until_http(http, wait_ready)
            await kernel.loader.instance("capture").say("warm up", user_id="warm")
            paths = Paths(kernel, model.base_url, http)
            try:
                async with floor_server(paths) as floor_port, http_client(floor_port) as floor:
                    paths.floor_http_client = floor
                    return {"tools": paths.tool_count, **(await work(paths, model))}
            finally:
                await paths.client.close()


def http_client(port: int) -> httpx.AsyncClient:
    """The client of both HTTP paths: keep-alive, enough connections for the load case."""
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=None),
        timeout=60,
    )


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


def profile(turns: int, path: str, top: int = 25) -> str:
    """The top of a cProfile of ``turns`` turns of ``path``: everything by own time,
    then Hearth's own modules (``core/``, the extensions) by cumulative time."""
    profiler = cProfile.Profile()

    async def work(paths: Paths, model: Any) -> dict[str, Any]:
        turn = paths.ways()[path]
        for i in range(20):  # warm
            await turn(f"p{i // CONVERSATION_TURNS}", f"warm {i}")
        profiler.enable()
        for i in range(turns):
            await turn(f"q{i // CONVERSATION_TURNS}", f"message {i}")
        profiler.disable()
        return {}

    asyncio.run(with_kernel(work))
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    # the extensions run from their copies in the bench's directory (``write_setup``)
    stats.sort_stats("cumulative").print_stats(f"({ROOT}/core/|/ext/)", top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="fewer turns (the CI gate)")
    parser.add_argument("--check", type=Path, metavar="FILE", help="fail past these budgets")
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile N turns")
    parser.add_argument(
        "--path", choices=("cli", "http", "floor", "floor_http"), default="cli", help="--profile's"
    )
    args = parser.parse_args()
    if args.profile:
        print(profile(args.profile, args.path), file=sys.stderr)
        return
    if args.check is None:
        print(json.dumps(measure(args.fast)))
        return
    from hooks import gate_file

    sys.exit(gate_file(args.check, "floor", lambda: measure(args.fast), "bench/floor.py"))


if __name__ == "__main__":
    main()
