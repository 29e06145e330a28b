"""Decide how a plugin host is started: confinement, environment, load parameters.

Confinement follows ``isolation.confinement``: ``bwrap`` requires bubblewrap,
``auto`` uses it when it works and otherwise falls back to limits only,
``none`` never uses it. A fallback is never silent: it is logged as a
warning (and ``doctor`` reports it), and an extension whose manifest needs
confinement to be honoured (``permissions.network: false``) is refused.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import IsolationSettings, LoaderSettings
from core.extensions.context.kernel_context import KernelContext
from core.extensions.contract import HOST_ABI_VERSION
from core.extensions.isolation.host.limits import HostLimits
from core.extensions.isolation.kernel.confinement import (
    ConfinementStatus,
    GrantedPath,
    SandboxSpec,
    bwrap_argv,
    probe,
)
from core.extensions.isolation.kernel.watchdog import GuardConfig
from core.extensions.isolation.protocol.errors import ConfinementError
from core.extensions.loading.manifest import Manifest

log = logging.getLogger("core.isolation")
_warned: set[str] = set()


@dataclass(frozen=True, slots=True)
class IsolationOptions:
    """The ``isolation`` settings (plus the loader's lifecycle deadline)."""

    call_timeout_s: float = 30.0
    limits: HostLimits = field(default_factory=HostLimits)
    confinement: str = "auto"
    restart_backoff_max_s: float = 60.0
    lifecycle_timeout_s: float = 10.0
    cgroups: str = "auto"
    watchdog_interval_s: float = 1.0

    @classmethod
    def from_settings(cls, iso: IsolationSettings, loader: LoaderSettings) -> IsolationOptions:
        """The options of the two sections it reads."""
        return cls(
            call_timeout_s=iso.call_timeout_s,
            limits=HostLimits(
                memory_mb=iso.memory_mb,
                cpu_seconds=iso.cpu_seconds,
                open_files=iso.open_files,
                pids_max=iso.pids_max,
                cpu_percent=iso.cpu_percent,
                tmp_mb=iso.tmp_mb,
                data_quota_mb=iso.data_quota_mb,
            ),
            confinement=iso.confinement,
            restart_backoff_max_s=iso.restart_backoff_max_s,
            cgroups=iso.cgroups,
            watchdog_interval_s=iso.watchdog_interval_s,
            lifecycle_timeout_s=loader.lifecycle_timeout_s,
        )


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything needed to (re)start one host."""

    prefix: list[str]
    cwd: str
    env: dict[str, str]
    load_params: dict[str, Any]
    confined: bool
    guard: GuardConfig


async def plan_launch(
    manifest: Manifest, code_dir: Path, context: KernelContext, options: IsolationOptions
) -> LaunchPlan:
    """``code_dir``: the snapshot of the code to import (ADR 0073). Raises
    ``ConfinementError`` when confinement is required but unavailable."""
    ext_dir = context.extension_dir
    data_dir = context.data_dir.resolve()
    env = host_environment(data_dir)
    status = await confinement_status(options.confinement)
    permissions = context.permissions
    if status.available and status.bwrap is not None:
        paths = tuple(GrantedPath.parse(p) for p in permissions.paths)
        tmp_bytes = options.limits.tmp_mb * 1024 * 1024
        spec = SandboxSpec(ext_dir, data_dir, permissions.network, paths, tmp_bytes, code_dir)
        prefix = bwrap_argv(spec, status.bwrap, env)
    else:
        if options.confinement == "bwrap":
            raise ConfinementError(f"isolation.confinement is bwrap, but {status.detail}")
        if not permissions.network:
            raise ConfinementError(
                "permissions.network: false cannot be enforced without confinement "
                f"({status.detail}); refusing to run this extension"
            )
        warn_unconfined(status.detail)
        prefix = []
    secrets = {name: context.get_secret(name) for name in manifest.secret_names}
    load_params = {
        "ext_id": manifest.id,
        "ext_dir": str(ext_dir),
        "code_dir": str(code_dir),
        "entrypoint": manifest.entrypoint,
        "data_dir": str(data_dir),
        "abi_version": HOST_ABI_VERSION,
        "config": context.config,
        "secrets": secrets,
        "subscribe": list(permissions.subscribe),
        "depends_on": list(manifest.depends_on),
        "limits": options.limits.to_wire(),
        "control": permissions.control,
    }
    guard = GuardConfig(
        manifest.id, data_dir, options.limits, options.cgroups, options.watchdog_interval_s
    )
    return LaunchPlan(prefix, str(data_dir), env, load_params, bool(prefix), guard)


async def confinement_status(mode: str) -> ConfinementStatus:
    """Probe bwrap (once per process) unless confinement is switched off."""
    if mode == "none":
        return ConfinementStatus(False, "confinement is switched off (isolation.confinement: none)")
    return await asyncio.to_thread(probe)


def host_environment(data_dir: Path) -> dict[str, str]:
    """The whole environment of a host: no secrets, no inherited variables."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(data_dir),
        "LANG": "C.UTF-8",
        "MALLOC_ARENA_MAX": "2",  # keep glibc from reserving address space per thread
    }


def warn_unconfined(detail: str) -> None:
    """Log once per reason: isolated extensions run with resource limits only."""
    if detail in _warned:
        return
    _warned.add(detail)
    log.warning(
        "PLUGIN HOSTS ARE NOT CONFINED: %s. Isolated extensions run in their own "
        "process with resource limits, a cleared environment and declared secrets "
        "only, but they can read other files and use the network.",
        detail,
    )
