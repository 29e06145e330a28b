"""Ten everyday tasks against the real local model (issue 47): how many succeed.

Starts the llama.cpp server of ``../shared/tools/local-llm/`` on a free port and
``main.py`` with the bundled memory, kv, scheduler, postprocessors and http_api
extensions pointed at it, then sends ten tasks a person asks an assistant for
through ``POST /v1/chat/completions`` — remember, recall, set and list
reminders, a recurring one, kv set and get, search past chats, forget, a
post-processor — and checks each by what it left behind (the extensions'
databases) or by the answer. Prints one JSON object: per task whether it
succeeded, its wall time and model requests, and the count.

``HEARTH_BENCH_LOCAL_FIRST`` (default ``on``): the memory and scheduler
extensions answer the sentences they understand without the model (ADR 0090),
as Hearth ships; ``off`` measures the model's own tool use.
``HEARTH_BENCH_SCHEMAS`` (default ``auto``): the provider's ``tool_schemas``
(ADR 0097). Other knobs as ``bench/prompt_cache.py`` (``THREADS``,
``HEARTH_LLM_SERVER``, ``HEARTH_BENCH_REQUESTS``: each model request and the
server's answer, one JSON line each, to read why a task failed). Skips with one line when the model is not installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from http_api import free_port, wait_ready  # noqa: E402
from prompt_cache import LLM_TOOLS, MODEL, MODEL_FILE, ModelServer, RecordingProxy  # noqa: E402

from support.ext_files import grant_all  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
EXTENSIONS = ("http_api", "memory", "kv", "scheduler", "postprocessors")
LOCAL_FIRST = os.environ.get("HEARTH_BENCH_LOCAL_FIRST", "on") != "off"
SCHEMAS = os.environ.get("HEARTH_BENCH_SCHEMAS", "auto")
TURN_TIMEOUT_S = float(os.environ.get("HEARTH_BENCH_TURN_TIMEOUT_S", "600"))

Check = Callable[[Path, dict[str, Any]], bool]


def rows(data: Path, ext_id: str, file: str, sql: str) -> list[tuple[Any, ...]]:
    path = data / "extensions" / ext_id / file
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return list(db.execute(sql))


def memories(data: Path) -> list[str]:
    return [str(r[0]) for r in rows(data, "memory", "memory.sqlite3", "SELECT text FROM memories")]


def schedules(data: Path) -> list[tuple[str, str]]:
    sql = "SELECT text, kind FROM schedules WHERE status = 'active'"
    return [(str(t), str(k)) for t, k in rows(data, "scheduler", "schedules.db", sql)]


def answer(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"] or "").lower()


TASKS: list[tuple[str, str, Check]] = [
    (
        "remember",
        "Please remember that my sister Anna lives in Lisbon.",
        lambda d, r: any("lisbon" in m.lower() for m in memories(d)),
    ),
    ("recall", "Where does my sister Anna live?", lambda d, r: "lisbon" in answer(r)),
    (
        "set a reminder",
        "Remind me in 10 minutes to check the oven.",
        lambda d, r: any("oven" in t.lower() and k == "once" for t, k in schedules(d)),
    ),
    ("list reminders", "What are my reminders?", lambda d, r: "oven" in answer(r)),
    (
        "recurring reminder",
        "Remind me every Monday at 9am to take out the bins.",
        lambda d, r: any("bin" in t.lower() and k != "once" for t, k in schedules(d)),
    ),
    (
        "kv set",
        "Store the value blue under the key favourite_colour.",
        lambda d, r: bool(
            rows(d, "kv", "kv.sqlite3", "SELECT 1 FROM kv WHERE key = 'favourite_colour'")
        ),
    ),
    ("kv get", "What is stored under the key favourite_colour?", lambda d, r: "blue" in answer(r)),
    (
        "search past chats",
        "Search our past conversations: what did I say about the oven?",
        lambda d, r: "oven" in answer(r),
    ),
    (
        "forget",
        "Forget that my sister lives in Lisbon.",
        lambda d, r: not any("lisbon" in m.lower() for m in memories(d)),
    ),
    (
        "post-processor",
        "Should I water a cactus every day? #decision",
        lambda d, r: bool((r.get("hearth") or {}).get("postprocess", {}).get("decision")),
    ),
]


async def post_results(http: httpx.AsyncClient, reply: dict[str, Any]) -> dict[str, Any]:
    """The turn's successful post-processor results (they may come after the answer)."""
    turn_id = (reply.get("hearth") or {}).get("turn_id")
    deadline = time.monotonic() + TURN_TIMEOUT_S
    while time.monotonic() < deadline:
        found = await http.get(f"/v1/postprocess/{turn_id}")
        if found.status_code == 200:
            results = found.json().get("results", {})
            return {k: v for k, v in results.items() if (v or {}).get("success")}
        await asyncio.sleep(1.0)
    return {}


def write_setup(tmp: Path, base_url: str, port: int) -> Path:
    for ext_id in EXTENSIONS:
        shutil.copytree(
            ROOT / "sandbox" / "extensions" / ext_id,
            tmp / "ext" / ext_id,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    provider = {
        "type": "openai_compatible",
        "base_url": base_url,
        "max_retries": 0,
        "timeout_s": TURN_TIMEOUT_S,
        "tool_schemas": SCHEMAS,
    }
    settings = {
        "paths": {"extensions": str(tmp / "ext"), "data": str(tmp / "data")},
        "logging": {"level": "WARNING"},
        "models": {
            "default": {"provider": "local", "model": MODEL},
            "providers": {"local": provider},
        },
        "channels": {"default": "http_api"},
        "policy": {"profile": "full_auto"},  # nobody answers approvals in a bench
        "turns": {"timeout_s": TURN_TIMEOUT_S},
        "extensions": {
            "http_api": {"listen": f"127.0.0.1:{port}", "reply_timeout_s": TURN_TIMEOUT_S},
            "memory": {"embeddings": {"backend": "none"}, "local_first": LOCAL_FIRST},
            "scheduler": {"local_first": LOCAL_FIRST},
        },
    }
    grant_all(tmp / "ext", tmp / "data")
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def run_tasks(settings: Path, port: int, data: Path) -> list[dict[str, Any]]:
    env = {**os.environ, "HEARTH_API_TOKEN": TOKEN, "HEARTH_SUPERVISED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "main.py"),
        "--settings",
        str(settings),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    results: list[dict[str, Any]] = []
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=TURN_TIMEOUT_S + 30,
        ) as http:
            await wait_ready(http, proc)
            for number, (name, text, check) in enumerate(TASKS, start=1):
                body = {
                    "model": "hearth",
                    "user": f"task{number}",  # a conversation each: one failure stays its own
                    "messages": [{"role": "user", "content": text}],
                }
                started = time.perf_counter()
                response = await http.post("/v1/chat/completions", json=body)
                wall = time.perf_counter() - started
                reply = response.json() if response.status_code == 200 else {}
                if name == "post-processor" and reply:
                    reply["hearth"]["postprocess"] = await post_results(http, reply)
                ok = bool(reply) and check(data, reply)
                text_out = answer(reply)[:160] if reply else f"HTTP {response.status_code}"
                results.append(
                    {"task": name, "ok": ok, "wall_s": round(wall, 1), "answer": text_out}
                )
                print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    return results


def main() -> None:
    if not MODEL_FILE.is_file() or not (LLM_TOOLS / "start.sh").is_file():
        print(f"bench/local_tasks.py: skipped, no local model at {MODEL_FILE} (run install.sh)")
        return
    load_before = os.getloadavg()
    model_port, api_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="hearth-bench-tasks-") as tmp_name:
        tmp = Path(tmp_name)
        server = ModelServer(model_port, tmp)
        try:
            server.wait_ready()
            # a recording proxy between (each request and answer to the file this names)
            with RecordingProxy(f"http://127.0.0.1:{model_port}") as proxy:
                upstream = proxy.base_url if os.environ.get("HEARTH_BENCH_REQUESTS") else None
                base_url = upstream or f"http://127.0.0.1:{model_port}/v1"
                settings = write_setup(tmp, base_url, api_port)
                results = asyncio.run(run_tasks(settings, api_port, tmp / "data"))
        finally:
            server.stop()
    print(
        json.dumps(
            {
                "model": MODEL,
                "local_first": LOCAL_FIRST,
                "tool_schemas": SCHEMAS,
                "succeeded": sum(r["ok"] for r in results),
                "tasks": results,
                "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "cpu_count": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
