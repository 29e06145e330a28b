"""WebAssembly extensions benchmark (ADR 0085): prints one JSON object.

(a) Per-call cost of one tool through the ``FunctionTool`` the orchestrator
    calls, the same echo in each boundary: in-process, process (plugin host)
    and wasm (wasmtime, in a worker thread, fuel and epoch deadline armed);
    p50/p99 over CALLS sequential calls, and the bare guest call without the
    thread hop for comparison.
(b) Start time per extension: a reload of each (stop, instantiate,
    initialize, start), median of RELOADS; for wasm also the first start
    (compiling the module) and later ones (compiled module cached).
(c) RSS per wasm extension: the growth of the process's resident set over
    INSTANCES more instances of a module, divided by their number.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents.tool_context import ToolContext

from core.config import load_settings
from core.extensions.isolation.kernel.confinement import probe
from core.extensions.isolation.wasm import WasmExtension
from core.extensions.loading.manifest import load_manifest
from core.extensions.sdk.testing import FakeContext
from core.kernel.runner import Kernel

CALLS = 2000
WARMUP = 200
RELOADS = 7
INSTANCES = 20

PYTHON_ECHO = """
from agents import function_tool


class Ext:
    async def initialize(self, context):
        pass

    async def start(self):
        pass

    async def stop(self):
        pass

    async def destroy(self):
        pass

    def health_check(self):
        return True

    def get_tools(self):
        @function_tool
        async def echo_{kind}(text: str) -> str:
            "Echo the text."
            return "hello"

        return [echo_{kind}]
"""


def wasm_echo() -> str:
    from support.wasm_guests import guest, tool_spec

    described = {"capabilities": ["ToolProvider"], "tools": [tool_spec("echo_wasm", text="string")]}
    return guest(described, tool="hello")


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_us": round(statistics.median(ordered) * 1e6, 1),
        "p99_us": round(ordered[int(len(ordered) * 0.99) - 1] * 1e6, 1),
    }


def rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def write_extensions(root: Path) -> Path:
    extensions = root / "extensions"
    for kind in ("inprocess", "process"):
        ext_dir = extensions / f"echo_{kind}"
        ext_dir.mkdir(parents=True)
        (ext_dir / "main.py").write_text(PYTHON_ECHO.replace("{kind}", kind))
        (ext_dir / "manifest.yaml").write_text(
            f"id: echo_{kind}\nname: Echo\nentrypoint: main:Ext\nisolation: {kind}\n"
        )
    ext_dir = extensions / "echo_wasm"
    ext_dir.mkdir(parents=True)
    (ext_dir / "guest.wat").write_text(wasm_echo())
    (ext_dir / "manifest.yaml").write_text("id: echo_wasm\nname: Echo\nwasm: {module: guest.wat}\n")
    return extensions


async def tool_calls(tool: Any) -> dict[str, float]:
    args = json.dumps({"text": "hello"})
    ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="b", tool_arguments=args)
    times: list[float] = []
    for i in range(WARMUP + CALLS):
        started = time.perf_counter()
        result = await tool.on_invoke_tool(ctx, args)
        if i >= WARMUP:
            times.append(time.perf_counter() - started)
    assert result == "hello", result
    return percentiles(times)


async def boundaries(root: Path) -> dict[str, Any]:
    extensions = write_extensions(root)
    settings = root / "settings.yaml"
    settings.write_text(
        json.dumps(
            {
                "paths": {"extensions": str(extensions), "data": str(root / "data")},
                "models": {"default": None},
                "loader": {"lifecycle_timeout_s": 60},
            }
        )
    )
    from support.ext_files import grant_all  # what the user does: `main.py extensions grant`

    grant_all(extensions, root / "data")
    kernel = Kernel(load_settings(settings))
    await kernel.load()
    try:
        calls, starts = {}, {}
        for kind in ("inprocess", "process", "wasm"):
            record = kernel.loader.records[f"echo_{kind}"]
            if record.error:
                raise RuntimeError(f"echo_{kind} failed to load: {record.error}")
            calls[kind] = await tool_calls(record.tools[0])
            times = []
            for _ in range(RELOADS):
                started = time.perf_counter()
                await kernel.reloads.reload(f"echo_{kind}")
                times.append(time.perf_counter() - started)
            starts[kind] = round(statistics.median(times) * 1000, 2)
        guest = kernel.loader.records["echo_wasm"].instance._guest
        params = {"name": "echo_wasm", "args": '{"text":"hello"}'}
        bare: list[float] = []
        for i in range(WARMUP + CALLS):
            started = time.perf_counter()
            guest.call("call_tool", params, "tool 'echo_wasm'")
            if i >= WARMUP:
                bare.append(time.perf_counter() - started)
        calls["wasm_guest_call_without_thread"] = percentiles(bare)
        return {
            "process_confined": probe().available,
            "tool_call": calls,
            "start_ms_reload_median": starts,
        }
    finally:
        await kernel.loader.shutdown()


async def wasm_starts_and_rss(root: Path) -> dict[str, Any]:
    ext_dir = root / "extensions" / "echo_wasm"
    # another module (one more data byte): its first start compiles it
    (ext_dir / "guest.wat").write_text(wasm_echo().replace('"hello"', '"hello "'))
    manifest = load_manifest(ext_dir)
    context = FakeContext(root / "fake", "echo_wasm")
    held: list[WasmExtension] = []
    starts = []
    before = rss_kb()
    for _ in range(INSTANCES):
        ext = WasmExtension(manifest, ext_dir)
        await ext.initialize(context)  # type: ignore[arg-type]
        starts.append(ext.start_ms)
        held.append(ext)
    after = rss_kb()
    return {
        "first_start_ms_compiling": round(starts[0], 2),
        "start_ms_compiled_median": round(statistics.median(starts[1:]), 2),
        "rss_kb_per_instance": round((after - before) / INSTANCES, 1),
        "linear_memory_kb_per_instance": held[0].memory_bytes // 1024,
    }


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result = await boundaries(root)
        result["wasm"] = await wasm_starts_and_rss(root)
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
