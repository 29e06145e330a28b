"""Tools the kernel gives the orchestrator (SPEC §1 ``core/tools``).

The door is lazy (PEP 562): the clock serves ``main.py usage`` without the SDK
the tools are built on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.tools.clock import now_at, now_in, offset_label, resolve_timezone, timezone_label
    from core.tools.core_tools import build_core_tools
    from core.tools.failures import (
        describe_tool_error,
        reporting_failures,
        reporting_failures_all,
        tool_error_message,
        tool_failure_text,
    )
    from core.tools.naming import sanitize_tool_name

__all__ = [
    "build_core_tools",
    "describe_tool_error",
    "now_at",
    "now_in",
    "offset_label",
    "reporting_failures",
    "reporting_failures_all",
    "resolve_timezone",
    "sanitize_tool_name",
    "timezone_label",
    "tool_error_message",
    "tool_failure_text",
]

_HOMES = {
    "now_at": "clock",
    "now_in": "clock",
    "offset_label": "clock",
    "resolve_timezone": "clock",
    "timezone_label": "clock",
    "build_core_tools": "core_tools",
    "describe_tool_error": "failures",
    "reporting_failures": "failures",
    "reporting_failures_all": "failures",
    "tool_error_message": "failures",
    "tool_failure_text": "failures",
    "sanitize_tool_name": "naming",
}

__getattr__, __dir__ = lazy_door(__name__, globals(), _HOMES, __all__)
