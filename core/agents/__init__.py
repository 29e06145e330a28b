"""Model routing, the orchestrator and declarative agents (SPEC §4).

The door is lazy (PEP 562): a command that reads what the kernel recorded
(``main.py usage``) imports the part it names, not the SDK behind the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.agents.declarative import DeclarativeAgentAdapter, ResolveTools
    from core.agents.errors import (
        AgentLayerError,
        ModelFailedError,
        ModelNotConfiguredError,
        PromptTemplateError,
        TokenBudgetExceededError,
    )
    from core.agents.hooked import HookedAgent, ToolWrapper
    from core.agents.model_router import ModelChoice, ModelRouter, ProviderCheck, configure_tracing
    from core.agents.orchestrator import ORCHESTRATOR_ID, Orchestrator
    from core.agents.toolset import (
        CORE_SOURCE,
        Capability,
        Toolset,
        agent_as_tool,
        build_toolset,
        capabilities_summary,
        merge_tools,
        tool_name_of,
    )

__all__ = [
    "CORE_SOURCE",
    "ORCHESTRATOR_ID",
    "AgentLayerError",
    "Capability",
    "DeclarativeAgentAdapter",
    "HookedAgent",
    "ModelChoice",
    "ModelFailedError",
    "ModelNotConfiguredError",
    "ModelRouter",
    "Orchestrator",
    "PromptTemplateError",
    "ProviderCheck",
    "ResolveTools",
    "TokenBudgetExceededError",
    "ToolWrapper",
    "Toolset",
    "agent_as_tool",
    "build_toolset",
    "capabilities_summary",
    "configure_tracing",
    "merge_tools",
    "tool_name_of",
]

_HOMES = {
    "DeclarativeAgentAdapter": "declarative",
    "ResolveTools": "declarative",
    "AgentLayerError": "errors",
    "ModelFailedError": "errors",
    "ModelNotConfiguredError": "errors",
    "PromptTemplateError": "errors",
    "TokenBudgetExceededError": "errors",
    "HookedAgent": "hooked",
    "ToolWrapper": "hooked",
    "ModelChoice": "model_router",
    "ModelRouter": "model_router",
    "ProviderCheck": "model_router",
    "configure_tracing": "model_router",
    "ORCHESTRATOR_ID": "orchestrator",
    "Orchestrator": "orchestrator",
    "CORE_SOURCE": "toolset",
    "Capability": "toolset",
    "Toolset": "toolset",
    "agent_as_tool": "toolset",
    "build_toolset": "toolset",
    "capabilities_summary": "toolset",
    "merge_tools": "toolset",
    "tool_name_of": "toolset",
}

__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
