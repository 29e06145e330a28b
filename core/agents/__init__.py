"""Model routing, the orchestrator and declarative agents (SPEC §4)."""

from core.agents.declarative import DeclarativeAgentAdapter, ResolveTools
from core.agents.errors import (
    AgentLayerError,
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
