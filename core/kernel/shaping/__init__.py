"""What shapes a turn besides hooks: the context chain, the stacked tools, the tool
call's layers (``tool_pipeline``, ADR 0079), and their assembly once per kernel.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.shaping.assembly import TurnShaping as TurnShaping
    from core.kernel.shaping.tool_pipeline import (
        TOOL_LAYERS as TOOL_LAYERS,
        LayerWrapper as LayerWrapper,
        ToolFeatures as ToolFeatures,
        ToolLayer as ToolLayer,
        ToolParts as ToolParts,
        ToolPipeline as ToolPipeline,
        consent_asks as consent_asks,
        layers_on as layers_on,
    )
    from core.kernel.shaping.tool_stacking import (
        StackedTools as StackedTools,
        ToolStacking as ToolStacking,
        stacks_by_extension as stacks_by_extension,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
