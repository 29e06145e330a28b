"""Detect which contract protocols an extension implements, and check them.

``isinstance`` on a runtime-checkable Protocol only checks that the names
exist; like pluggy's ``_verify_hook`` we also check that methods the kernel
awaits are coroutine functions, so a mistake is reported at load with the
method's name instead of failing on first use.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from core.extensions.contract import (
    AgentProvider,
    ChannelProvider,
    CommandProvider,
    ContextProvider,
    Extension,
    InteractiveChannel,
    PostProcessor,
    PostProcessorProvider,
    SchedulerProvider,
    ServiceProvider,
    SetupProvider,
    StatusReporter,
    StreamingChannelProvider,
    ToolProvider,
    ToolRendererProvider,
    WorkflowProvider,
)
from core.extensions.contract.hook_specs import CONVERSATIONS, HOOK_SPECS
from core.extensions.loading.signatures import check_signatures
from core.runtime.errors import HearthError


class Capability(StrEnum):
    """The contract protocols by name; the values are the public strings shown by
    ``extensions --json`` and sent over the plugin-host RPC."""

    TOOL = "ToolProvider"
    CHANNEL = "ChannelProvider"
    STREAMING_CHANNEL = "StreamingChannelProvider"
    INTERACTIVE_CHANNEL = "InteractiveChannel"
    AGENT = "AgentProvider"
    SCHEDULER = "SchedulerProvider"
    WORKFLOW = "WorkflowProvider"
    SERVICE = "ServiceProvider"
    CONTEXT = "ContextProvider"
    SETUP = "SetupProvider"
    COMMAND = "CommandProvider"
    STATUS = "StatusReporter"
    # the turn pipeline's hooks (SPEC §9), one member per ``@hook_point`` row, named
    # after its protocol (``TagHook`` → ``TAG``): added from the table, so a new hook
    # point needs no line here (Enum's documented ``_ignore_`` + ``vars()`` idiom)
    _ignore_ = ["members", "spec"]
    members = vars()
    for spec in HOOK_SPECS:
        members[spec.member] = spec.capability
    # answer post-processors (SPEC §9, seed 000)
    POST_PROCESSOR = "PostProcessor"
    POST_PROCESSOR_PROVIDER = "PostProcessorProvider"
    TOOL_RENDERER = "ToolRendererProvider"  # render hints of tool calls (ADR 0096)


# protocol -> the methods the kernel awaits
PROTOCOLS: dict[type, tuple[str, ...]] = {
    ToolProvider: (),
    ChannelProvider: ("send_to_user", "send_message"),
    StreamingChannelProvider: (
        "on_stream_start",
        "on_stream_chunk",
        "on_stream_status",
        "on_stream_end",
    ),
    InteractiveChannel: ("ask_user", "close_request"),
    AgentProvider: ("invoke",),
    SchedulerProvider: ("execute_task",),
    WorkflowProvider: (),
    ServiceProvider: ("run_background",),
    ContextProvider: ("get_context",),
    SetupProvider: ("apply_config", "on_setup_complete"),
    CommandProvider: (),
    StatusReporter: ("status_lines",),
    **{spec.protocol: (spec.method,) for spec in HOOK_SPECS},
    PostProcessor: ("execute",),
    PostProcessorProvider: (),
    ToolRendererProvider: ("render_tool",),
}
HOOKS: frozenset[Capability] = frozenset(Capability(spec.capability) for spec in HOOK_SPECS)
# capability -> the manifest permission it needs (SPEC §6): the hooks' column of the
# spec table, plus the other protocols that see or change turns — a context provider
# writes into every system prompt, a post-processor reads the user's message and the answer
PERMISSIONS: dict[Capability, str] = {
    **{Capability(spec.capability): spec.permission for spec in HOOK_SPECS},
    Capability.CONTEXT: CONVERSATIONS,
    Capability.POST_PROCESSOR: CONVERSATIONS,
    Capability.POST_PROCESSOR_PROVIDER: CONVERSATIONS,
    Capability.TOOL_RENDERER: CONVERSATIONS,  # it reads tools' arguments and results
}
LIFECYCLE_ASYNC = ("initialize", "start", "stop", "destroy")


class CapabilityError(HearthError, TypeError):
    """An extension's methods do not match the protocol it appears to implement."""


def detect_capabilities(instance: Any) -> list[Capability]:
    """Protocol names the instance implements, in contract order.

    Raises ``CapabilityError`` naming the method when a method the kernel
    awaits is not ``async``.
    """
    if not isinstance(instance, Extension):
        missing = [m for m in (*LIFECYCLE_ASYNC, "health_check") if not hasattr(instance, m)]
        raise CapabilityError(f"missing lifecycle method(s): {', '.join(missing)}")
    _require_async(instance, LIFECYCLE_ASYNC)
    check_signatures(instance, Extension)
    found = []
    for proto, async_methods in PROTOCOLS.items():
        if isinstance(instance, proto):
            _require_async(instance, async_methods)
            check_signatures(instance, proto)
            found.append(Capability(proto.__name__))
    return found


def _require_async(instance: Any, names: tuple[str, ...]) -> None:
    for name in names:
        method = getattr(instance, name)
        if not inspect.iscoroutinefunction(method):
            raise CapabilityError(f"{type(instance).__name__}.{name} must be `async def`")


def require_permissions(
    capabilities: Iterable[Capability], permissions: object, manifest_file: str
) -> None:
    """Raise ``CapabilityError`` when a detected capability needs a permission the
    manifest does not declare (``PERMISSIONS``; ``permissions`` holds them as
    booleans), naming the file, the permission and the capabilities: the author
    must declare it, so that the user is asked for it before the code runs again."""
    missing: dict[str, list[str]] = {}
    for capability in capabilities:
        permission = PERMISSIONS.get(capability)
        if permission is not None and not getattr(permissions, permission, False):
            missing.setdefault(permission, []).append(capability.value)
    for permission, needing in missing.items():
        raise CapabilityError(
            f"{manifest_file}: permissions.{permission} is not declared, but the extension "
            f"implements {', '.join(needing)}; declare `{permission}: true` under "
            "`permissions:` and grant it"
        )


def hook_capability(protocol: type) -> Capability:
    """A hook point's member, from its protocol: kernel code names the points it calls
    this way (``TAG = hook_capability(TagHook)``), so a new point needs no enum line."""
    return Capability(protocol.__name__)
