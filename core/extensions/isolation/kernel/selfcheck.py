"""``doctor``'s view of isolation, measured rather than assumed.

A probe host is started exactly the way plugin hosts are (``plan``-style
bwrap options, the same gate into a cgroup, the same environment) but runs
a few lines that report what the process really has: its uid, its
capability sets, ``no_new_privs`` and its cgroups. ``judge`` turns that into
doctor lines, and never says "confined" for a host that holds capabilities.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.config import IsolationSettings, LoaderSettings
from core.extensions.isolation.kernel.confinement import SandboxSpec, bwrap_argv
from core.extensions.isolation.kernel.launch import (
    IsolationOptions,
    confinement_status,
    host_environment,
)
from core.extensions.isolation.kernel.process import HostProcess
from core.extensions.isolation.kernel.watchdog import (
    GuardConfig,
    HostGuard,
    cgroup_support,
    tree_usage,
)

__all__ = ["HostProbe", "confinement_report", "judge", "probe_host"]

PROBE_ID = "doctor-probe"
PROBE_TIMEOUT_S = 20.0
PROBE_CODE = """
import json, os, sys
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
report = {k: status.get(k, '').strip() for k in ('Uid', 'CapEff', 'CapBnd', 'NoNewPrivs')}
os.write(int(sys.argv[2]), (json.dumps(report) + '\\n').encode())
os.read(int(sys.argv[2]), 1)  # stay until the kernel has looked at the process tree
"""

log = logging.getLogger("core.isolation")


@dataclass(frozen=True, slots=True)
class HostProbe:
    """What a probe host reported about itself."""

    confined: bool  # started inside bwrap
    uid: int
    cap_eff: int
    cap_bnd: int
    no_new_privs: bool
    tree_in_cgroup: bool | None  # every process of the probe's tree in its cgroup (None: none)


async def probe_host(isolation: IsolationSettings, loader: LoaderSettings) -> HostProbe:
    """Start one probe host like a plugin host and read its report."""
    options = IsolationOptions.from_settings(isolation, loader)
    status = await confinement_status(options.confinement)
    with tempfile.TemporaryDirectory(prefix="hearth-probe-") as tmp:
        data_dir = Path(tmp)
        env = host_environment(data_dir)
        prefix: list[str] = []
        if status.available and status.bwrap is not None:
            spec = SandboxSpec(data_dir, data_dir, False, (), options.limits.tmp_mb * 1024 * 1024)
            prefix = bwrap_argv(spec, status.bwrap, env)
        config = GuardConfig(
            PROBE_ID, data_dir, options.limits, options.cgroups, options.watchdog_interval_s
        )
        guard = HostGuard(config)
        host = await HostProcess.spawn(
            prefix, cwd=tmp, env=env, logger=log, guard=guard, code=PROBE_CODE
        )
        in_cgroup: bool | None = None
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                line = await host.reader.readline()
            if guard.cgroup is not None:
                tree = await asyncio.to_thread(tree_usage, host.pid)
                members = await asyncio.to_thread(guard.cgroup.pids)
                in_cgroup = len(tree.pids) > 0 and set(tree.pids) <= members
        finally:
            await host.close(1.0)
    if not line:
        raise RuntimeError(f"the probe host reported nothing ({host.describe_exit()})")
    report = json.loads(line)
    return HostProbe(
        confined=bool(prefix),
        uid=int(str(report["Uid"]).split()[0]),
        cap_eff=int(report["CapEff"], 16),
        cap_bnd=int(report["CapBnd"], 16),
        no_new_privs=report["NoNewPrivs"] == "1",
        tree_in_cgroup=in_cgroup,
    )


def judge(probe: HostProbe, confinement_detail: str) -> tuple[str, str]:
    """``("ok" | "fail" | "warn", text)`` about the privileges a probe host had."""
    facts = (
        f"probe host: uid {probe.uid}, CapEff {probe.cap_eff:016x}, "
        f"CapBnd {probe.cap_bnd:016x}, NoNewPrivs {int(probe.no_new_privs)}"
    )
    if not probe.confined:
        return "warn", f"PLUGIN HOSTS ARE NOT CONFINED: {confinement_detail}; {facts}"
    if probe.cap_eff or probe.cap_bnd or not probe.no_new_privs:
        return "fail", f"PLUGIN HOSTS ARE NOT CONFINED: bwrap left privileges; {facts}"
    return "ok", f"plugin hosts are confined ({confinement_detail}); {facts}"


async def confinement_report(
    iso: IsolationSettings, loader: LoaderSettings
) -> list[tuple[str, str]]:
    """Doctor's isolation lines: privileges of a real probe host, and its limits."""
    status = await confinement_status(iso.confinement)
    try:
        probe = await probe_host(iso, loader)
    except Exception as exc:
        return [("fail", f"a probe plugin host could not run: {type(exc).__name__}: {exc}")]
    lines = [judge(probe, status.detail)]
    if iso.confinement == "bwrap" and not probe.confined:
        lines.append(("fail", "isolated extensions will not load (isolation.confinement: bwrap)"))
    support = await asyncio.to_thread(cgroup_support, iso.cgroups)
    limits = (
        f"memory {iso.memory_mb} MB, {iso.pids_max} tasks, {iso.cpu_percent}% of a core, "
        f"{iso.cpu_seconds} CPU-seconds, data {iso.data_quota_mb} MB, /tmp {iso.tmp_mb} MB"
    )
    if not support.available:
        text = (
            f"PLUGIN HOST TREES ARE NOT LIMITED BY CGROUPS: {support.detail}; per-process "
            f"rlimits and the kernel's watchdog only ({limits})"
        )
        lines.append(("warn", text))
    elif not probe.tree_in_cgroup:
        lines.append(("fail", f"{support.detail} found, but the probe host was not in its cgroup"))
    else:
        lines.append(("ok", f"plugin host trees are limited by {support.detail}: {limits}"))
    return lines
