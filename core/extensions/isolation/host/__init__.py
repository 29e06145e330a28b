"""The plugin host: the child process that runs one isolated extension, its
client of the kernel's context, and the limits it sets on itself.

The door imports its parts plainly: the plugin host loads every one of them
anyway and none is heavy (ADR 0081). Each name is declared once, as
``Name as Name``.
"""

from __future__ import annotations

from core.extensions.isolation.host.client_context import ClientContext as ClientContext
from core.extensions.isolation.host.limits import (
    HostLimits as HostLimits,
    apply_limits as apply_limits,
)
