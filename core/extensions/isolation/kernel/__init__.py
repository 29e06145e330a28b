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
    from core.extensions.isolation.kernel.cgroups import (
        PARENT as PARENT,
        CgroupSupport as CgroupSupport,
        HostCgroup as HostCgroup,
    )
    from core.extensions.isolation.kernel.confinement import (
        SandboxSpec as SandboxSpec,
        bwrap_argv as bwrap_argv,
        probe as probe,
    )
    from core.extensions.isolation.kernel.factory import (
        confinement_report as confinement_report,
        isolated_factory as isolated_factory,
    )
    from core.extensions.isolation.kernel.hook_mixins import (
        HOOK_MIXINS as HOOK_MIXINS,
        hook_mixin as hook_mixin,
    )
    from core.extensions.isolation.kernel.kernel_side import ContextServer as ContextServer
    from core.extensions.isolation.kernel.launch import (
        confinement_status as confinement_status,
        host_environment as host_environment,
        warn_unconfined as warn_unconfined,
    )
    from core.extensions.isolation.kernel.mixins import proxy_class as proxy_class
    from core.extensions.isolation.kernel.process import HostProcess as HostProcess
    from core.extensions.isolation.kernel.proxy import IsolatedExtension as IsolatedExtension
    from core.extensions.isolation.kernel.selfcheck import (
        HostProbe as HostProbe,
        judge as judge,
    )
    from core.extensions.isolation.kernel.watchdog import (
        GuardConfig as GuardConfig,
        HostGuard as HostGuard,
        cgroup_support as cgroup_support,
        data_dir_bytes as data_dir_bytes,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
