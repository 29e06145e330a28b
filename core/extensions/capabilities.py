"""Detect which contract protocols an extension implements, and check them.

``isinstance`` on a runtime-checkable Protocol only checks that the names
exist; like pluggy's ``_verify_hook`` we also check that methods the kernel
awaits are coroutine functions, so a mistake is reported at load with the
method's name instead of failing on first use.
"""

from __future__ import annotations

import inspect
from enum import StrEnum
from typing import Any

from core.extensions.contract import (
    AgentProvider,
    ChannelProvider,
    CommandProvider,
    ContextProvider,
    Extension,
    SchedulerProvider,
    ServiceProvider,
    SetupProvider,
    StreamingChannelProvider,
    ToolProvider,
)
from core.extensions.signatures import check_signatures


class Capability(StrEnum):
    """The contract protocols by name; the values are the public strings shown by
    ``extensions --json`` and sent over the plugin-host RPC."""

    TOOL = "ToolProvider"
    CHANNEL = "ChannelProvider"
    STREAMING_CHANNEL = "StreamingChannelProvider"
    AGENT = "AgentProvider"
    SCHEDULER = "SchedulerProvider"
    SERVICE = "ServiceProvider"
    CONTEXT = "ContextProvider"
    SETUP = "SetupProvider"
    COMMAND = "CommandProvider"


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
    AgentProvider: ("invoke",),
    SchedulerProvider: ("execute_task",),
    ServiceProvider: ("run_background",),
    ContextProvider: ("get_context",),
    SetupProvider: ("apply_config", "on_setup_complete"),
    CommandProvider: (),
}
LIFECYCLE_ASYNC = ("initialize", "start", "stop", "destroy")


class CapabilityError(TypeError):
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
