"""The plugin host: the child process that runs one isolated extension, its
client of the kernel's context, and the limits it sets on itself.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.isolation.host.client_context import ClientContext as ClientContext
    from core.extensions.isolation.host.limits import (
        HostLimits as HostLimits,
        apply_limits as apply_limits,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
