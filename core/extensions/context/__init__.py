"""The kernel's side of ``ExtensionContext``: one ``KernelContext`` per extension,
its state calls, the services it lends, and the gateways to agents and questions.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.context.agent_gateway import AgentGateway
    from core.extensions.context.kernel_context import KernelContext
    from core.extensions.context.services import KernelServices
    from core.extensions.context.shared_services import (
        ExtensionServices,
        ServiceRegistry,
        ServicesClosedError,
    )
    from core.extensions.context.status_lines import collect_status_lines
    from core.extensions.context.ui_gateway import UI_KINDS, UiGateway

__all__ = [
    "UI_KINDS",
    "AgentGateway",
    "ExtensionServices",
    "KernelContext",
    "KernelServices",
    "ServiceRegistry",
    "ServicesClosedError",
    "UiGateway",
    "collect_status_lines",
]

_HOMES = {
    "AgentGateway": "agent_gateway",
    "ExtensionServices": "shared_services",
    "KernelContext": "kernel_context",
    "KernelServices": "services",
    "ServiceRegistry": "shared_services",
    "ServicesClosedError": "shared_services",
    "UI_KINDS": "ui_gateway",
    "UiGateway": "ui_gateway",
    "collect_status_lines": "status_lines",
}

__getattr__, __dir__ = lazy_door("core.extensions.context", globals(), _HOMES, __all__)
