"""The kernel's side of ``ExtensionContext``: one ``KernelContext`` per extension,
its state calls, the services it lends, and the gateways to agents and questions.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.context.agent_gateway import AgentGateway as AgentGateway
    from core.extensions.context.kernel_context import KernelContext as KernelContext
    from core.extensions.context.services import KernelServices as KernelServices
    from core.extensions.context.shared_services import (
        ExtensionServices as ExtensionServices,
        ServiceRegistry as ServiceRegistry,
        ServicesClosedError as ServicesClosedError,
    )
    from core.extensions.context.status_lines import collect_status_lines as collect_status_lines
    from core.extensions.context.store_location import extension_storage as extension_storage
    from core.extensions.context.ui_gateway import (
        UI_KINDS as UI_KINDS,
        UiGateway as UiGateway,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
