"""The only kernel module extensions may import.

Capabilities are small ``@runtime_checkable`` Protocols, detected with
``isinstance`` by the loader (seed 002, "Extension Types"). Data crossing the
boundary is plain frozen dataclasses, so an isolated extension (SPEC §6) can
ship it over JSON-RPC unchanged. The data lives in ``contract_data`` and the
turn pipeline's hook protocols (SPEC §9) in ``hook_protocols`` with their one
table of specs in ``hook_specs``, the context API in ``context_protocol``,
answer post-processors in ``postprocess_contract``; extensions import all of
them from here.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from core.events.models import Event
from core.extensions.contract import hooks
from core.extensions.contract.abi import HOST_ABI_VERSION
from core.extensions.contract.addresses import REPLY_TAG_MARK, reply_address, split_reply_address
from core.extensions.contract.channels import TURN_CANCEL_TOPIC, InteractiveChannel
from core.extensions.contract.context import (
    AgentExtensionContext,
    EventHandler,
    ExtensionContext,
    SharedServices,
)
from core.extensions.contract.data import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    Annotated,
    Command,
    CommandHandler,
    CompactionPlan,
    GuardrailTrip,
    Leadership,
    McpAnswer,
    McpOp,
    ModelRoute,
    RequestOption,
    ShortCircuit,
    StateScope,
    StoreLocation,
    ToolCall,
    ToolDecision,
    TurnContext,
    TurnOutcome,
    UserRequest,
)
from core.extensions.contract.files import Artifact, FileChannel, KeptFile, attach
from core.extensions.contract.hook_specs import HOOK_SPECS, HookSpec
from core.extensions.contract.hooks import *  # noqa: F403 (every hook point, by its __all__)
from core.extensions.contract.postprocess import (
    CATEGORIES,
    OUTPUT_TARGETS,
    OutputTarget,
    PostProcessContext,
    PostProcessor,
    PostProcessorProvider,
    PostProcessResult,
    PostProcessTopics,
)
from core.extensions.contract.render import (
    RenderHint,
    ToolRendererProvider,
    hint_text,
)
from core.extensions.contract.status import (
    DeadLetterState,
    DeliveryState,
    EventState,
    ExtensionState,
    KernelStatus,
    McpServerState,
)

__all__ = [
    "CATEGORIES",
    "HOOK_SPECS",
    "HOST_ABI_VERSION",
    "OUTPUT_TARGETS",
    "REPLY_TAG_MARK",
    "TURN_CANCEL_TOPIC",
    "AgentDescriptor",
    "AgentExtensionContext",
    "AgentInvocationContext",
    "AgentProvider",
    "AgentResponse",
    "Annotated",
    "Artifact",
    "ChannelProvider",
    "Command",
    "CommandHandler",
    "CommandProvider",
    "CompactionPlan",
    "ContextProvider",
    "DeadLetterState",
    "DeliveryState",
    "Event",
    "EventHandler",
    "EventState",
    "Extension",
    "ExtensionContext",
    "ExtensionState",
    "FileChannel",
    "GuardrailTrip",
    "HookSpec",
    "InteractiveChannel",
    "KeptFile",
    "KernelStatus",
    "Leadership",
    "McpAnswer",
    "McpOp",
    "McpServerState",
    "ModelRoute",
    "OutputTarget",
    "PostProcessContext",
    "PostProcessResult",
    "PostProcessTopics",
    "PostProcessor",
    "PostProcessorProvider",
    "RenderHint",
    "RequestOption",
    "SchedulerProvider",
    "ServiceProvider",
    "SetupProvider",
    "SharedServices",
    "ShortCircuit",
    "StateScope",
    "StatusReporter",
    "StoreLocation",
    "StreamingChannelProvider",
    "ToolCall",
    "ToolDecision",
    "ToolProvider",
    "ToolRendererProvider",
    "TurnContext",
    "TurnOutcome",
    "UserRequest",
    "WorkflowProvider",
    "attach",
    "hint_text",
    "reply_address",
    "split_reply_address",
]
__all__ += hooks.__all__  # a hook point declared in ``hooks`` is exported with nothing else


# --------------------------------------------------------------------- protocols


@runtime_checkable
class Extension(Protocol):
    """Lifecycle every extension implements."""

    async def initialize(self, context: ExtensionContext) -> None: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def destroy(self) -> None: ...
    def health_check(self) -> bool: ...


@runtime_checkable
class ToolProvider(Protocol):
    """Tools (``agents.FunctionTool`` objects) for the orchestrator."""

    def get_tools(self) -> list[Any]: ...


@runtime_checkable
class ChannelProvider(Protocol):
    """A way to reach the user."""

    async def send_to_user(self, user_id: str, message: str) -> None: ...
    async def send_message(self, message: str) -> None: ...


@runtime_checkable
class StreamingChannelProvider(Protocol):
    """A channel that shows a reply while it is being generated. ``on_stream_start``
    may return ``False`` when nobody at that address reads the text as it comes:
    the turn then runs unstreamed, which costs less, and no chunk or status is
    sent; its reply still comes as ``on_stream_end`` (ADR 0065)."""

    async def on_stream_start(self, user_id: str) -> bool | None: ...
    async def on_stream_chunk(self, user_id: str, chunk: str) -> None: ...
    async def on_stream_status(self, user_id: str, status: str) -> None: ...
    async def on_stream_end(self, user_id: str, full_text: str) -> None: ...


@runtime_checkable
class AgentProvider(Protocol):
    """A specialised agent, wrapped as a tool for the orchestrator."""

    def get_agent_descriptor(self) -> AgentDescriptor: ...
    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse: ...


@runtime_checkable
class SchedulerProvider(Protocol):
    """Runs the manifest's ``schedules``; may return ``{"text": ...}``."""

    async def execute_task(self, task_name: str) -> dict[str, Any] | None: ...


@runtime_checkable
class WorkflowProvider(Protocol):
    """Routines of several steps the kernel runs durably (ADR 0091): each a mapping
    with the manifest's ``workflows:`` entry's shape (docs/workflows.md), checked
    when the extension is wired; added to the manifest's own."""

    def get_workflows(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class ServiceProvider(Protocol):
    """A background loop, supervised (restarted with backoff) by the loader."""

    async def run_background(self) -> None: ...


@runtime_checkable
class ContextProvider(Protocol):
    """Adds text to the system instructions of every turn."""

    @property
    def context_priority(self) -> int: ...
    async def get_context(self, prompt: str, turn_context: TurnContext) -> str | None: ...


@runtime_checkable
class SetupProvider(Protocol):
    """An extension that walks the user through its configuration."""

    def get_setup_schema(self) -> list[dict[str, Any]]: ...
    async def apply_config(self, name: str, value: str) -> None: ...
    async def on_setup_complete(self) -> tuple[bool, str]: ...


@runtime_checkable
class StatusReporter(Protocol):
    """A few lines about the extension's own state, shown by ``doctor`` and ``/status``
    (e.g. memory: the embedding backend, its model, how many memories have vectors)."""

    async def status_lines(self) -> list[str]: ...


@runtime_checkable
class CommandProvider(Protocol):
    """Slash commands that work with no model configured."""

    def get_commands(self) -> list[Command]: ...


# --------------------------------------------------------------- the context API
