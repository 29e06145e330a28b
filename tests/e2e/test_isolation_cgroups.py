"""Cgroups of plugin hosts: created with the limits, removed with the host, stale ones cleaned."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_isolation_hostile import isolated, settings

from conftest import ext_code
from core.extensions.isolation.host.limits import HostLimits
from core.extensions.isolation.kernel.cgroups import PARENT, CgroupSupport, HostCgroup
from core.extensions.isolation.kernel.watchdog import cgroup_support
from support.harness import running_kernel

SUPPORT = cgroup_support("auto")
needs_cgroups = pytest.mark.skipif(
    not SUPPORT.available, reason=f"no usable cgroups: {SUPPORT.detail}"
)
LIMITS = HostLimits(memory_mb=100, pids_max=20, cpu_percent=50)


def host_dirs() -> list[Path]:
    return [d for _, root in SUPPORT.roots for d in (root / PARENT / str(os.getpid())).glob("*")]


@needs_cgroups
async def test_each_host_gets_a_cgroup_that_goes_with_it(make_ext, settings_file):
    make_ext("plain", ext_code(), isolated())
    async with running_kernel(settings(settings_file)) as kernel:
        pid = kernel.loader.instance("plain").host_pid
        with open(f"/proc/{pid}/cgroup") as file:
            groups = file.read()
        assert f"/{PARENT}/{os.getpid()}/plain." in groups
        assert any(d.name.startswith("plain.") for d in host_dirs())
    assert not [d for d in host_dirs() if d.name.startswith("plain.")]


@needs_cgroups
def test_cgroups_of_a_dead_kernel_are_cleaned_and_their_processes_killed():
    dead = _dead_pid()
    stale = [root / PARENT / str(dead) / "escaped.1" for _, root in SUPPORT.roots]
    survivor = subprocess.Popen(["sleep", "60"])
    try:
        _place(survivor, stale)
        group = HostCgroup.create(SUPPORT, "fresh", LIMITS)
        try:
            assert survivor.wait(timeout=10) == -9
            assert not any(d.parent.exists() for d in stale)
        finally:
            assert group.remove()
    finally:
        survivor.kill()
        survivor.wait()


def _place(survivor: subprocess.Popen[bytes], stale: list[Path]) -> None:
    """Put ``survivor`` in the stale cgroups. Another test's kernel may clean them
    meanwhile (they are stale to every kernel): a directory gone is made again, and a
    survivor that kernel killed is what this test expects of the cleaning too."""
    for directory in stale:
        for _ in range(20):
            if survivor.poll() is not None:
                return
            directory.mkdir(parents=True, exist_ok=True)
            try:
                (directory / "cgroup.procs").write_text(str(survivor.pid))
                break
            except (FileNotFoundError, ProcessLookupError):
                continue


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_cgroup_v2_files_carry_the_limits(tmp_path: Path):
    support = CgroupSupport(2, "cgroup v2 (test tree)", (("", tmp_path),))
    group = HostCgroup.create(support, "ext", LIMITS)
    directory = group.dirs["memory"]
    assert directory == tmp_path / PARENT / str(os.getpid()) / group.name
    assert (directory / "memory.max").read_text() == str(100 * 1024 * 1024)
    assert (directory / "memory.swap.max").read_text() == "0"
    assert (directory / "pids.max").read_text() == "20"
    assert (directory / "cpu.max").read_text() == "50000 100000"
    group.add(1234)
    assert (directory / "cgroup.procs").read_text() == "1234"
