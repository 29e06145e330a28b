"""Process-isolation benchmark: prints one JSON object.

(a) Tool-call round trip kernel -> plugin host -> kernel through the proxy's
    ``FunctionTool`` (what the orchestrator calls), a no-op ``before_tool_call``
    hook through the proxy (arguments encoded, tagged result decoded), a
    context call the other way (``ctx.leadership()`` from the host, served by the
    kernel's ``KernelContext``), and a bare RPC ping for comparison; p50/p99 over CALLS sequential calls,
    confined with bwrap when it works.
(b) Spawn to ready: from spawning a host to its first answered ping (the
    extension's own imports excluded), with and without bwrap, and each again
    with the host's cgroup created and entered through the start gate (ADR
    0010) when cgroups can be used; median of SPAWNS.
Targets (issue 7): round trip p50 < 1 ms, p99 < 5 ms; spawn to ready < 1 s.
"""

from __future__ import annotations

import asyncio
import json
import logging
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
from core.extensions.contract import ToolCall, TurnContext
from core.extensions.isolation.host.limits import HostLimits
from core.extensions.isolation.kernel.confinement import (
    SandboxSpec,
    bwrap_argv,
    probe,
)
from core.extensions.isolation.kernel.launch import host_environment
from core.extensions.isolation.kernel.process import HostProcess
from core.extensions.isolation.kernel.watchdog import GuardConfig, HostGuard, cgroup_support
from core.extensions.isolation.protocol.rpc import RpcPeer
from core.kernel.runner import Kernel

CALLS = 2000
WARMUP = 200
SPAWNS = 10

EXTENSION = """
from agents import function_tool


class Ext:
    async def initialize(self, context):
        self.ctx = context

    async def start(self):
        pass

    async def stop(self):
        pass

    async def destroy(self):
        pass

    def health_check(self):
        return True

    async def before_tool_call(self, call, turn):
        return None

    def get_tools(self):
        @function_tool
        async def echo(text: str) -> str:
            "Echo the text."
            return text

        @function_tool
        async def context_calls(count: int) -> list[float]:
            "Time COUNT context calls made from the host (seconds each)."
            import time

            times = []
            for _ in range(count):
                started = time.perf_counter()
                await self.ctx.leadership()
                times.append(time.perf_counter() - started)
            return times

        return [echo, context_calls]
"""


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
    }


async def round_trips(root: Path) -> dict[str, Any]:
    ext_dir = root / "extensions" / "echo"
    ext_dir.mkdir(parents=True)
    (ext_dir / "main.py").write_text(EXTENSION)
    (ext_dir / "manifest.yaml").write_text(
        "id: echo\nname: Echo\nentrypoint: main:Ext\nisolation: process\n"
        "permissions: {conversations: true}\n"  # its before_tool_call hook
    )
    settings = root / "settings.yaml"
    settings.write_text(
        json.dumps(
            {
                "paths": {"extensions": str(root / "extensions"), "data": str(root / "data")},
                "models": {"default": None},
                "loader": {"lifecycle_timeout_s": 60},
            }
        )
    )
    from support.ext_files import grant_all  # what the user does: `main.py extensions grant echo`

    grant_all(root / "extensions", root / "data")
    kernel = Kernel(load_settings(settings))
    await kernel.load()
    try:
        record = kernel.loader.records["echo"]
        if record.error:
            raise RuntimeError(f"echo extension failed to load: {record.error}")
        tool = record.tools[0]
        args = json.dumps({"text": "hello"})
        ctx = ToolContext(context=None, tool_name="echo", tool_call_id="b", tool_arguments=args)
        tool_times: list[float] = []
        for i in range(WARMUP + CALLS):
            started = time.perf_counter()
            result = await tool.on_invoke_tool(ctx, args)
            if i >= WARMUP:
                tool_times.append(time.perf_counter() - started)
        assert result == "hello", result
        instance = record.instance
        call, turn = ToolCall("echo", {"text": "hello"}, "b"), TurnContext(turn_id="bench")
        hook_times: list[float] = []
        for i in range(WARMUP + CALLS):
            started = time.perf_counter()
            decision = await instance.before_tool_call(call, turn)
            if i >= WARMUP:
                hook_times.append(time.perf_counter() - started)
        assert decision is None, decision
        timer = record.tools[1]
        args = json.dumps({"count": WARMUP + CALLS})
        ctx = ToolContext(context=None, tool_name=timer.name, tool_call_id="c", tool_arguments=args)
        timed = await timer.on_invoke_tool(ctx, args)
        context_times = (json.loads(timed) if isinstance(timed, str) else timed)[WARMUP:]
        ping_times: list[float] = []
        for i in range(WARMUP + CALLS):
            started = time.perf_counter()
            await instance.remote("ping", None)
            if i >= WARMUP:
                ping_times.append(time.perf_counter() - started)
        return {
            "confined": instance.confined,
            "tool_call": percentiles(tool_times),
            "before_tool_call_hook": percentiles(hook_times),
            "context_call": percentiles(context_times),
            "bare_ping": percentiles(ping_times),
        }
    finally:
        await kernel.loader.shutdown()


async def spawn_to_ready(root: Path, confined: bool, cgroups: bool = False) -> float:
    ext_dir, data_dir = root / "ext", root / "spawn-data"
    ext_dir.mkdir(exist_ok=True)
    data_dir.mkdir(exist_ok=True)
    env = host_environment(data_dir)
    status = probe()
    prefix: list[str] = []
    if confined:
        assert status.bwrap is not None
        prefix = bwrap_argv(SandboxSpec(ext_dir, data_dir, network=False), status.bwrap, env)
    logger = logging.getLogger("bench")
    times = []
    for _ in range(SPAWNS):
        started = time.perf_counter()
        guard = HostGuard(GuardConfig("bench", data_dir, HostLimits())) if cgroups else None
        host = await HostProcess.spawn(
            prefix, cwd=str(data_dir), env=env, logger=logger, guard=guard
        )
        peer = RpcPeer(
            host.reader, host.writer, on_request=_refuse, on_notification=lambda m, p: None
        )
        serving = asyncio.create_task(peer.serve())
        await peer.call("ping", deadline=10)
        times.append(time.perf_counter() - started)
        await host.close(2.0)
        serving.cancel()
    return round(statistics.median(times) * 1000, 1)


async def _refuse(method: str, params: Any) -> Any:
    raise LookupError(method)


async def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result: dict[str, Any] = {"cpu_count": os.cpu_count(), "calls": CALLS}
        result["round_trip"] = await round_trips(root)
        spawn = result["spawn_to_ready_ms"] = {"limits_only": await spawn_to_ready(root, False)}
        if probe().available:
            spawn["bwrap"] = await spawn_to_ready(root, True)
        else:
            spawn["bwrap"] = None
            result["bwrap_unavailable"] = probe().detail
        if cgroup_support("auto").available:
            spawn["limits_only+cgroup"] = await spawn_to_ready(root, False, cgroups=True)
            if probe().available:
                spawn["bwrap+cgroup"] = await spawn_to_ready(root, True, cgroups=True)
        else:
            result["cgroups_unavailable"] = cgroup_support("auto").detail
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
