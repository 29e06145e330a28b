"""Assembly of one kernel process and the turn path (SPEC §1).

``Kernel`` is the thin front: it builds the collaborators (loader, bus,
router, commands, context chain, conversations) and orders start and stop;
each module here does one job behind it. The door is lazy (PEP 562): a
light caller of a subpackage (``core.kernel.spending`` for ``main.py usage``)
does not load the kernel and the agents SDK behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.runner import Kernel as Kernel

__getattr__, __dir__ = lazy_door(__name__, globals())
