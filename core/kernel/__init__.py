"""Assembly of one kernel process and the turn path (SPEC §1).

``Kernel`` is the thin front: it builds the collaborators (loader, bus,
router, commands, context chain, conversations) and orders start and stop;
each module here does one job behind it.
"""

from core.kernel.runner import Kernel

__all__ = ["Kernel"]
