"""Wiring of process isolation into the kernel: the loader's factory, ``doctor``'s check.

Kept out of the package ``__init__`` so that the plugin host, which imports
``core.extensions.isolation.host.plugin_host``, does not import the kernel side (and
``agents``) just to start.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import IsolationSettings, LoaderSettings
from core.extensions.context.services import KernelServices
from core.extensions.isolation.kernel.confinement import ConfinementStatus, probe
from core.extensions.isolation.kernel.launch import IsolationOptions, confinement_status
from core.extensions.isolation.kernel.proxy import IsolatedExtension
from core.extensions.isolation.kernel.selfcheck import (
    HostProbe,
    confinement_report,
    judge,
    probe_host,
)
from core.extensions.isolation.protocol.errors import (
    CallTimeoutError,
    ConfinementError,
    HostUnavailableError,
    IsolationError,
)
from core.extensions.loading.loader import InstanceFactory
from core.extensions.loading.manifest import Manifest
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus

if TYPE_CHECKING:
    from core.extensions.isolation.wasm import WasmExtension

__all__ = [
    "CallTimeoutError",
    "ConfinementError",
    "ConfinementStatus",
    "HostProbe",
    "HostUnavailableError",
    "IsolatedExtension",
    "IsolationError",
    "IsolationOptions",
    "confinement_report",
    "confinement_status",
    "isolated_factory",
    "judge",
    "probe",
    "probe_host",
]


def isolated_factory(
    isolation: IsolationSettings, loader: LoaderSettings, records: Mapping[str, ExtensionRecord]
) -> InstanceFactory:
    """The loader's ``isolated_factory``: a process proxy, or a ``WasmExtension`` for
    ``isolation: wasm``, whose host deaths (traps) update the record (``records``: the
    loader's table)."""
    options = IsolationOptions.from_settings(isolation, loader)

    def make(manifest: Manifest, code_dir: Path, services: KernelServices) -> Any:
        proxy: IsolatedExtension | WasmExtension | None = None

        def on_status(ext_id: str, reason: str) -> None:
            record = records.get(ext_id)
            # only the instance the record holds: a reload's old or new one is not
            if record is not None and record.instance is proxy:
                if record.status is ExtensionStatus.ACTIVE:
                    record.fail(reason)  # the supervisor sees the transition and restarts it

        if manifest.isolation == "wasm":  # wasmtime (~4 MB) loads with the first such extension
            from core.extensions.isolation.wasm import WasmExtension

            proxy = WasmExtension(manifest, code_dir, services, on_status)
        else:
            proxy = IsolatedExtension(manifest, code_dir, services, options, on_status)
        return proxy

    return make
