"""The kernel's side of process isolation: spawning and watching plugin hosts,
confinement and limits, the proxies that stand in for isolated extensions,
the kernel's end of their context calls, and ``doctor``'s self-check.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.isolation.kernel.cgroups import PARENT, CgroupSupport, HostCgroup
    from core.extensions.isolation.kernel.confinement import SandboxSpec, bwrap_argv, probe
    from core.extensions.isolation.kernel.factory import confinement_report, isolated_factory
    from core.extensions.isolation.kernel.hook_mixins import HOOK_MIXINS, hook_mixin
    from core.extensions.isolation.kernel.kernel_side import ContextServer
    from core.extensions.isolation.kernel.launch import (
        confinement_status,
        host_environment,
        warn_unconfined,
    )
    from core.extensions.isolation.kernel.mixins import proxy_class
    from core.extensions.isolation.kernel.process import HostProcess
    from core.extensions.isolation.kernel.proxy import IsolatedExtension
    from core.extensions.isolation.kernel.selfcheck import HostProbe, judge
    from core.extensions.isolation.kernel.watchdog import (
        GuardConfig,
        HostGuard,
        cgroup_support,
        data_dir_bytes,
    )

__all__ = [
    "HOOK_MIXINS",
    "PARENT",
    "CgroupSupport",
    "ContextServer",
    "GuardConfig",
    "HostCgroup",
    "HostGuard",
    "HostProbe",
    "HostProcess",
    "IsolatedExtension",
    "SandboxSpec",
    "bwrap_argv",
    "cgroup_support",
    "confinement_report",
    "confinement_status",
    "data_dir_bytes",
    "hook_mixin",
    "host_environment",
    "isolated_factory",
    "judge",
    "probe",
    "proxy_class",
    "warn_unconfined",
]

_HOMES = {
    "CgroupSupport": "cgroups",
    "ContextServer": "kernel_side",
    "GuardConfig": "watchdog",
    "HOOK_MIXINS": "hook_mixins",
    "HostCgroup": "cgroups",
    "HostGuard": "watchdog",
    "HostProbe": "selfcheck",
    "HostProcess": "process",
    "IsolatedExtension": "proxy",
    "PARENT": "cgroups",
    "SandboxSpec": "confinement",
    "bwrap_argv": "confinement",
    "cgroup_support": "watchdog",
    "confinement_report": "factory",
    "confinement_status": "launch",
    "data_dir_bytes": "watchdog",
    "hook_mixin": "hook_mixins",
    "host_environment": "launch",
    "isolated_factory": "factory",
    "judge": "selfcheck",
    "probe": "confinement",
    "proxy_class": "mixins",
    "warn_unconfined": "launch",
}

__getattr__, __dir__ = lazy_door("core.extensions.isolation.kernel", globals(), _HOMES, __all__)
