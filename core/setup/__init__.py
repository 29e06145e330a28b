"""``main.py setup``: the wizard, its scripted form, and the file writers behind it.

The door is lazy (PEP 562, as ``core.events``): nothing pays for the wizard's
imports (the kernel, for extension setups) unless ``setup`` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.setup.command import run_setup_command as run_setup_command
    from core.setup.plan import SetupPlan as SetupPlan
    from core.setup.settings_file import write_changes as write_changes

__getattr__, __dir__ = lazy_door(__name__, globals())
