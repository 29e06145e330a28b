"""The kernel process's resident memory after a conversation of 40 turns.

A kernel (``main.py``, its own process, supervised so no terminal is needed)
runs every bundled extension that needs no outside service (all of
``sandbox/extensions`` but the chat channels that need tokens), the memory
extension with its default local embeddings (the model's ONNX form already in
its cache, as on every start but the first); the model is the fake OpenAI
server (``tests/support/fake_openai.py``) in this process. One conversation
sends ``TURNS`` messages through ``POST /v1/chat/completions``. Measured, in
MB, for the kernel process (``VmRSS``):

- ``ready``: when the HTTP API first answers;
- ``after_turns``: once the last turn is answered;
- ``settled``: once memory's background work (its model loading, the turns
  embedded) stops moving it — no change over 1 MB in 5 s, at most 60 s later;
- ``settled_anon``: the private part of ``settled`` (``RssAnon``; the rest is
  pages of files — libraries, mapped model data — the system can drop and reread);
- ``peak``: the most it held until then (``VmHWM``: loading the model);
- ``pss_settled``: the proportional set size of the kernel and every process
  it started (``/proc/PID/smaps_rollup``), in case an extension runs in a child.

The same again with ``extensions.memory.embeddings.backend: none`` (words
only): the difference is the embedding model's share. And once more with the
model in a process of its own (``embeddings.idle_exit_s``, ADR 0104):
``model_process`` is that process's VmRSS once it settled, ``idle`` the
kernel's and ``pss_idle`` the whole tree's once it exited after
``IDLE_EXIT_S``. Prints one JSON object.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from http_api import TOKEN, free_port, wait_ready  # noqa: E402  (and sys.path for tests/)
from procfs import status_mb  # noqa: E402

from core.runtime.datadir import extension_data_dir  # noqa: E402
from sandbox.extensions.memory.model_process import PACKAGE  # noqa: E402
from support.ext_files import grant_all  # noqa: E402
from support.fake_openai import FakeOpenAIServer, models_section  # noqa: E402

TURNS = 40
NEED_TOKENS = ("telegram_channel", "discord_channel", "slack_channel", "matrix_channel")
NEED_SERVICE = ("email_channel",)  # a mailbox
SETTLE_MB, SETTLE_WINDOW_S, SETTLE_LIMIT_S, POLL_S = 1.0, 5.0, 60.0, 0.25
IDLE_EXIT_S = 10.0
MODEL_CACHE = "model-cache"  # the memory extension's (its main.MODEL_CACHE)
BUILD_CACHE = (
    "import sys; from pathlib import Path; "
    "from sandbox.extensions.memory.e5 import E5Encoder; E5Encoder(Path(sys.argv[1]))"
)


def write_setup(
    tmp: Path, base_url: str, port: int, backend: str, idle_exit_s: float | None
) -> Path:
    ext, data = tmp / "ext", tmp / "data"
    for source in sorted((ROOT / "sandbox" / "extensions").iterdir()):
        if source.is_dir() and source.name not in NEED_TOKENS + NEED_SERVICE + ("__pycache__",):
            shutil.copytree(source, ext / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    grant_all(ext, data)
    if backend == "local":  # built once, as the first start does; this start loads it
        cache = extension_data_dir(data, "memory") / MODEL_CACHE
        subprocess.run([sys.executable, "-c", BUILD_CACHE, str(cache)], check=True, cwd=ROOT)
    settings = {
        "paths": {"extensions": str(ext), "data": str(data)},
        "logging": {"level": "WARNING"},
        "models": models_section(base_url, max_retries=0),
        "channels": {"default": "http_api"},
        "policy": {"profile": "full_auto"},
        "extensions": {
            "http_api": {"listen": f"127.0.0.1:{port}"},
            "memory": {"embeddings": {"backend": backend, "idle_exit_s": idle_exit_s}},
        },
    }
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def family(pid: int) -> list[int]:
    """``pid`` and every process descended from it."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo.extend(int(child) for child in task.read_text().split())
    return found


def pss_mb(pid: int) -> float:
    total_kb = 0
    for member in family(pid):
        try:
            rollup = Path(f"/proc/{member}/smaps_rollup").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended meanwhile
        total_kb += sum(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")
        )
    return total_kb / 1024


async def settled_mb(pid: int) -> tuple[float, float]:
    """VmRSS once it moved less than ``SETTLE_MB`` over ``SETTLE_WINDOW_S`` (or at the
    limit), and the seconds that took."""
    start = time.monotonic()
    samples: list[tuple[float, float]] = []
    while True:
        now = time.monotonic()
        samples.append((now, status_mb(pid)))
        window = [mb for at, mb in samples if at >= now - SETTLE_WINDOW_S]
        steady = now - start >= SETTLE_WINDOW_S and max(window) - min(window) <= SETTLE_MB
        if steady or now - start >= SETTLE_LIMIT_S:
            return samples[-1][1], now - start
        await asyncio.sleep(POLL_S)


async def own_process(pid: int) -> dict[str, float]:
    """The model process's VmRSS once it settled; the kernel's VmRSS and the tree's PSS
    once the model process exited, idle."""
    child = None
    for _ in range(int(SETTLE_LIMIT_S / POLL_S)):
        child = next((c for c in family(pid)[1:] if PACKAGE in _cmdline(c)), None)
        if child is not None:
            break
        await asyncio.sleep(POLL_S)
    if child is None:
        raise RuntimeError("the embedding model's process did not start")
    model, _ = await settled_mb(child)
    for _ in range(int((IDLE_EXIT_S + SETTLE_LIMIT_S) / POLL_S)):
        if not any(PACKAGE in _cmdline(c) for c in family(pid)[1:]):
            break
        await asyncio.sleep(POLL_S)
    else:
        raise RuntimeError(f"the embedding model's process did not exit after {IDLE_EXIT_S} s")
    return {
        "model_process": round(model, 1),
        "idle": round(status_mb(pid), 1),
        "pss_idle": round(pss_mb(pid), 1),
    }


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""


async def conversation(http: httpx.AsyncClient) -> None:
    for turn in range(TURNS):
        text = f"message {turn}: my sister Ana lives in Lisbon and keeps {turn} cats"
        body = {"model": "hearth", "user": "ana", "messages": [{"role": "user", "content": text}]}
        response = await http.post("/v1/chat/completions", json=body)
        response.raise_for_status()
        answer = response.json()["choices"][0]["message"]["content"]
        assert answer == f"echo: {text}", answer


async def measure(backend: str, idle_exit_s: float | None = None) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory(prefix="hearth-bench-rss-") as tmp_name,
        FakeOpenAIServer() as model,
    ):
        port = free_port()
        settings = write_setup(Path(tmp_name), model.base_url, port, backend, idle_exit_s)
        env = {**os.environ, "HEARTH_API_TOKEN": TOKEN, "HEARTH_SUPERVISED": "1"}
        command = [str(ROOT / "main.py"), "--settings", str(settings)]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *command, stdin=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as http:
                await wait_ready(http, proc)
                ready = status_mb(proc.pid)
                await conversation(http)
                after = status_mb(proc.pid)
                settled, took = await settled_mb(proc.pid)
                pss = pss_mb(proc.pid)
                anon, peak = status_mb(proc.pid, "RssAnon"), status_mb(proc.pid, "VmHWM")
                own = await own_process(proc.pid) if idle_exit_s is not None else {}
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
    return {
        "ready": round(ready, 1),
        "after_turns": round(after, 1),
        "settled": round(settled, 1),
        "settled_after_s": round(took, 1),
        "settled_anon": round(anon, 1),
        "peak": round(peak, 1),
        "pss_settled": round(pss, 1),
        **own,
    }


def main() -> None:
    local, words = asyncio.run(measure("local")), asyncio.run(measure("none"))
    own = asyncio.run(measure("local", IDLE_EXIT_S))
    share = round(local["settled"] - words["settled"], 1)
    result = {
        "memory_local": local,
        "memory_none": words,
        "memory_local_own_process": own,
        "model_share_settled": share,
    }
    print(json.dumps({**result, "turns": TURNS, "cpu_count": os.cpu_count()}))


if __name__ == "__main__":
    main()
