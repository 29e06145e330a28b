"""The HTTP API under load (issue 19): many conversations at once through a real kernel.

A kernel (``main.py``, its own process, only the ``http_api`` extension) serves
``POST /v1/chat/completions``; the model is the fake OpenAI server
(``tests/support/fake_openai.py``) in this process. Prints one JSON object:

- ``conversations`` × ``messages``: each conversation sends its messages one
  after the other, all conversations at once, against a model answering in
  ``model_latency_s`` (200 ms). ``wall_s`` against ``ideal_s`` (messages ×
  latency: what an infinitely fast kernel would need), as ``wall_ratio``.
- ``kernel_added_ms_p50`` / ``_p99``: per message, the client's latency minus
  the time the model server spent on that message — everything Hearth (and the
  HTTP and client stack) adds.
- ``requests_per_s_0ms_model``: throughput with an instant model.
- ``ok``: ``wall_ratio <= 1.5`` and ``kernel_added_ms_p99 < 20``.

``--check`` exits 1 when ``ok`` is false. ``--conversations`` / ``--messages``
scale it down for a quick look.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.fake_openai import FakeOpenAIServer  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
MODEL_LATENCY_S = 0.2
WALL_RATIO_MAX = 1.5
ADDED_P99_MS_MAX = 20.0


def write_setup(tmp: Path, model: FakeOpenAIServer, port: int) -> Path:
    shutil.copytree(
        ROOT / "sandbox" / "extensions" / "http_api",
        tmp / "ext" / "http_api",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    settings = {
        "paths": {"extensions": str(tmp / "ext"), "data": str(tmp / "data")},
        "logging": {"level": "WARNING"},
        "models": {
            "default": {"provider": "fake", "model": "fake-model"},
            "providers": {
                "fake": {
                    "type": "openai_compatible",
                    "base_url": model.base_url,
                    "api_key": "key-of-the-fake-model",
                    "max_retries": 0,
                    "warm": "off",  # the bare SDK it is compared with warms nothing
                }
            },
        },
        "channels": {"default": "http_api"},
        "turns": {"concurrency": 256},
        "extensions": {"http_api": {"listen": f"127.0.0.1:{port}", "max_inflight": 1024}},
    }
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_ready(http: httpx.AsyncClient, proc: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise RuntimeError(f"the kernel exited with {proc.returncode}")
        try:
            if (await http.get("/v1/models")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError("the HTTP API did not become ready in 60 s")


async def conversation(
    http: httpx.AsyncClient, name: str, messages: int, latencies: dict[str, float]
) -> None:
    for i in range(messages):
        text = f"{name} message {i}"
        body = {"model": "hearth", "user": name, "messages": [{"role": "user", "content": text}]}
        start = time.perf_counter()
        response = await http.post("/v1/chat/completions", json=body)
        latencies[text] = time.perf_counter() - start
        response.raise_for_status()
        assert response.json()["choices"][0]["message"]["content"] == f"echo: {text}"


async def load(
    http: httpx.AsyncClient, prefix: str, conversations: int, messages: int
) -> tuple[float, dict[str, float]]:
    latencies: dict[str, float] = {}
    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for c in range(conversations):
            group.create_task(conversation(http, f"{prefix}{c}", messages, latencies))
    return time.perf_counter() - start, latencies


async def measure(conversations: int, messages: int) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-http-") as tmp_name,
        FakeOpenAIServer(delay_s=MODEL_LATENCY_S) as model,
    ):
        port = free_port()
        settings = write_setup(Path(tmp_name), model, port)
        env = {**os.environ, "HEARTH_API_TOKEN": TOKEN, "HEARTH_SUPERVISED": "1"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "main.py"),
            "--settings",
            str(settings),
            stdin=subprocess.DEVNULL,
            env=env,
        )
        limits = httpx.Limits(max_connections=conversations * 2, max_keepalive_connections=None)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=60
            ) as http:
                await wait_ready(http, proc)
                await load(http, "warm", 10, 2)  # imports, connections, caches
                wall, latencies = await load(http, "c", conversations, messages)
                served = dict(model.timings)
                model.delay_s = 0.0
                fast_wall, fast = await load(http, "f", conversations, messages)
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
    added = sorted((latencies[t] - served[t]) * 1000 for t in latencies)
    ideal = messages * MODEL_LATENCY_S
    p99 = added[max(0, int(len(added) * 0.99) - 1)]
    result = {
        "conversations": conversations,
        "messages": messages,
        "model_latency_s": MODEL_LATENCY_S,
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "wall_ratio": round(wall / ideal, 3),
        "kernel_added_ms_p50": round(statistics.median(added), 2),
        "kernel_added_ms_p99": round(p99, 2),
        "requests_per_s_0ms_model": round(len(fast) / fast_wall, 1),
        "cpu_count": os.cpu_count(),
    }
    result["ok"] = result["wall_ratio"] <= WALL_RATIO_MAX and p99 < ADDED_P99_MS_MAX
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--messages", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 unless within budget")
    args = parser.parse_args()
    result = asyncio.run(measure(args.conversations, args.messages))
    print(json.dumps(result))
    if args.check and not result["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
