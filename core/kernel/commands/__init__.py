"""Slash commands the kernel answers with no model call: the table, the built-ins, /grant,
/setup and what /status reads.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.commands.setup import (
        extension_commands as extension_commands,
        setup_command as setup_command,
    )
    from core.kernel.commands.status_source import KernelStatusSource as KernelStatusSource

__getattr__, __dir__ = lazy_door(__name__, globals())
