"""Model routing, the orchestrator and declarative agents (SPEC §4).

The door is lazy (PEP 562): a command that reads what the kernel recorded
(``main.py usage``) imports the part it names, not the SDK behind the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.agents.declarative import (
        DeclarativeAgentAdapter as DeclarativeAgentAdapter,
        ResolveTools as ResolveTools,
    )
    from core.agents.errors import (
        AgentLayerError as AgentLayerError,
        ModelFailedError as ModelFailedError,
        ModelNotConfiguredError as ModelNotConfiguredError,
        PromptTemplateError as PromptTemplateError,
        TokenBudgetExceededError as TokenBudgetExceededError,
    )
    from core.agents.hooked import (
        HookedAgent as HookedAgent,
        ToolWrapper as ToolWrapper,
    )
    from core.agents.model_router import (
        ModelChoice as ModelChoice,
        ModelRouter as ModelRouter,
        ProviderCheck as ProviderCheck,
        WarmTarget as WarmTarget,
        configure_tracing as configure_tracing,
    )
    from core.agents.orchestrator import (
        ORCHESTRATOR_ID as ORCHESTRATOR_ID,
        Orchestrator as Orchestrator,
        dated_clock as dated_clock,
    )
    from core.agents.toolset import (
        CORE_SOURCE as CORE_SOURCE,
        Capability as Capability,
        Toolset as Toolset,
        agent_as_tool as agent_as_tool,
        build_toolset as build_toolset,
        capabilities_summary as capabilities_summary,
        merge_tools as merge_tools,
        tool_name_of as tool_name_of,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
