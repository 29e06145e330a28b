"""What shapes a turn besides hooks: the context chain, the stacked tools, the tool
call's layers (``tool_pipeline``, ADR 0079), and their assembly once per kernel.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.shaping.assembly import TurnShaping
    from core.kernel.shaping.tool_pipeline import (
        TOOL_LAYERS,
        LayerWrapper,
        ToolFeatures,
        ToolLayer,
        ToolParts,
        ToolPipeline,
        consent_asks,
        layers_on,
    )
    from core.kernel.shaping.tool_stacking import StackedTools, ToolStacking, stacks_by_extension

__all__ = [
    "TOOL_LAYERS",
    "LayerWrapper",
    "StackedTools",
    "ToolFeatures",
    "ToolLayer",
    "ToolParts",
    "ToolPipeline",
    "ToolStacking",
    "TurnShaping",
    "consent_asks",
    "layers_on",
    "stacks_by_extension",
]

_HOMES = {
    "TOOL_LAYERS": "tool_pipeline",
    "LayerWrapper": "tool_pipeline",
    "ToolFeatures": "tool_pipeline",
    "ToolLayer": "tool_pipeline",
    "ToolParts": "tool_pipeline",
    "ToolPipeline": "tool_pipeline",
    "consent_asks": "tool_pipeline",
    "layers_on": "tool_pipeline",
    "StackedTools": "tool_stacking",
    "ToolStacking": "tool_stacking",
    "TurnShaping": "assembly",
    "stacks_by_extension": "tool_stacking",
}

__getattr__, __dir__ = lazy_door("core.kernel.shaping", globals(), _HOMES, __all__)
