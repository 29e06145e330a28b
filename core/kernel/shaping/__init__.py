"""What shapes a turn besides hooks: the context chain, the stacked tools, and their
assembly once per kernel.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.shaping.assembly import TurnShaping
    from core.kernel.shaping.tool_stacking import StackedTools, ToolStacking, stacks_by_extension

__all__ = [
    "StackedTools",
    "ToolStacking",
    "TurnShaping",
    "stacks_by_extension",
]

_HOMES = {
    "StackedTools": "tool_stacking",
    "ToolStacking": "tool_stacking",
    "TurnShaping": "assembly",
    "stacks_by_extension": "tool_stacking",
}

__getattr__, __dir__ = lazy_door("core.kernel.shaping", globals(), _HOMES, __all__)
