"""Issue 11 item 7: limits hold for a plugin host's whole process tree.

Hostile isolated extensions start children that together want more memory
than ``memory_mb``, start 300 processes, fill ``/tmp`` and their data dir,
and spin in a thread and a child at once. Small limits keep each test to a
few seconds; tests that need cgroups or bubblewrap skip with one line.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_isolation_hostile import command, isolated, needs_bwrap, settings

from conftest import ext_code
from core.extensions.isolation.kernel.watchdog import cgroup_support, data_dir_bytes
from support.harness import running_kernel, wait_for

needs_cgroups = pytest.mark.skipif(
    not cgroup_support("auto").available,
    reason=f"no usable cgroups: {cgroup_support('auto').detail}",
)
LIMITS = {"call_timeout_s": 30, "watchdog_interval_s": 0.2, "pids_max": 32}
MB = 1024 * 1024

HOSTILE = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import asyncio, json, os, subprocess, sys, threading, time

        def children(code, n):
            return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]

        async def hog(args, turn):
            # four children, each holding 80 MB it has written to (so it is really RAM)
            marker = str(self.ctx.data_dir / "held")
            code = f"import os, time; x = b'x' * (80 << 20); open({marker!r} + str(os.getpid()), 'w'); time.sleep(30)"
            procs = children(code, 4)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                held = [n for n in os.listdir(self.ctx.data_dir) if n.startswith("held")]
                if len(held) + sum(p.poll() is not None for p in procs) >= 4:
                    break
                await asyncio.sleep(0.1)
            if args == "hold":  # keep holding it: a watchdog samples only now and then
                await asyncio.sleep(20)
            codes = [p.poll() for p in procs]
            for p in procs:
                p.kill()
            held = [n for n in os.listdir(self.ctx.data_dir) if n.startswith("held")]
            return json.dumps({"codes": codes, "held": len(held)})

        async def fork(args, turn):
            procs, error = [], None
            try:
                for _ in range(300):
                    procs.append(subprocess.Popen(["sleep", "30"]))
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc.strerror}"
            for p in procs:
                p.kill()
                p.wait()
            return json.dumps({"started": len(procs), "error": error})

        async def fill_tmp(args, turn):
            written = 0
            try:
                with open("/tmp/fill", "wb") as file:
                    for _ in range(64):
                        file.write(b"x" * MB)
                        file.flush()
                        written += MB
            except OSError as exc:
                return json.dumps({"written": written, "error": exc.strerror})
            return json.dumps({"written": written, "error": None})

        async def big_file(args, turn):
            try:
                with open(self.ctx.data_dir / "big", "wb") as file:
                    for _ in range(32):
                        file.write(b"x" * MB)
                        file.flush()
            except OSError as exc:
                return exc.strerror
            return "written"

        async def fill_data(args, turn):
            async def writer():
                for i in range(200):
                    (self.ctx.data_dir / f"part{i}").write_bytes(b"x" * MB)
                    await asyncio.sleep(0.05)
            self.filler = asyncio.create_task(writer())
            return "filling"

        async def spin(args, turn):
            def burn():
                while True:
                    pass
            threading.Thread(target=burn, daemon=True).start()
            self.child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            return "spinning"

        return [Command(n, n, f) for n, f in (("hog", hog), ("fork", fork), ("fill_tmp", fill_tmp),
                ("big_file", big_file), ("fill_data", fill_data), ("spin", spin))]
    """,
    header="MB = 1024 * 1024",
)


def limited(settings_file, **isolation):
    return settings(settings_file, **{**LIMITS, **isolation})


async def died_with(kernel, ext_id: str, reason: str, within_s: float = 20) -> str:
    record = kernel.loader.records[ext_id]
    await wait_for(lambda: record.error is not None and reason in record.error, within_s)
    return record.error or ""


@needs_cgroups
async def test_children_together_cannot_exceed_memory_mb(make_ext, settings_file):
    make_ext("hostile", HOSTILE, isolated())
    async with running_kernel(limited(settings_file, memory_mb=256)) as kernel:
        reply = await command(kernel, "/hog")
    if reply.startswith("{"):  # the OOM killer took children; else it took the host itself
        codes = json.loads(reply)["codes"]
        assert codes.count(None) < 4 and -9 in codes, f"four children held 320 MB: {reply}"
    else:
        assert "killed by the out-of-memory killer" in reply, reply


async def test_without_cgroups_the_watchdog_stops_a_tree_over_memory_mb(make_ext, settings_file):
    make_ext("hostile", HOSTILE, isolated())
    async with running_kernel(limited(settings_file, memory_mb=256, cgroups="none")) as kernel:
        hogging = asyncio.create_task(command(kernel, "/hog hold"))
        error = await died_with(kernel, "hostile", "over isolation.memory_mb (256)")
        assert "killed: its processes held" in error
        assert "over isolation.memory_mb (256)" in await hogging


@needs_cgroups
async def test_a_host_cannot_start_300_processes(make_ext, settings_file):
    make_ext("hostile", HOSTILE, isolated())
    async with running_kernel(limited(settings_file)) as kernel:
        report = json.loads(await command(kernel, "/fork"))
    assert report["started"] < 32 and report["error"] is not None, report


@needs_bwrap
async def test_tmp_cannot_grow_past_tmp_mb(make_ext, settings_file):
    make_ext("hostile", HOSTILE, isolated())
    async with running_kernel(limited(settings_file, tmp_mb=8)) as kernel:
        report = json.loads(await command(kernel, "/fill_tmp"))
    assert report["error"] == "No space left on device"
    assert report["written"] <= 8 * MB


async def test_the_data_quota_stops_a_writer(make_ext, settings_file, tmp_path: Path):
    make_ext("hostile", HOSTILE, isolated())
    data_dir = tmp_path / "data" / "extensions" / "hostile"
    async with running_kernel(limited(settings_file, data_quota_mb=4)) as kernel:
        assert await command(kernel, "/big_file") == "File too large"  # one file: RLIMIT_FSIZE
        (data_dir / "big").unlink()
        assert await command(kernel, "/fill_data") == "filling"
        error = await died_with(kernel, "hostile", "over isolation.data_quota_mb (4)")
        assert "killed: its data dir holds" in error
        # over quota, the host is not started again until space is freed
        await died_with(kernel, "hostile", "start failed: QuotaExceededError")
        assert kernel.loader.records["hostile"].status.value == "error"
    assert data_dir_bytes(data_dir) < 16 * MB


@pytest.mark.parametrize("cgroups", ["auto", "none"])
async def test_a_spinning_thread_and_child_are_stopped_by_the_cpu_budget(
    make_ext, settings_file, cgroups
):
    if cgroups == "auto" and not cgroup_support("auto").available:
        pytest.skip(f"no usable cgroups: {cgroup_support('auto').detail}")
    make_ext("hostile", HOSTILE, isolated())
    config = limited(settings_file, cpu_seconds=3, cpu_percent=200, cgroups=cgroups)
    async with running_kernel(config) as kernel:
        assert await command(kernel, "/spin") == "spinning"
        error = await died_with(kernel, "hostile", "over isolation.cpu_seconds (3)", 30)
    assert "killed: its processes used" in error
