"""Tools the kernel gives the orchestrator (SPEC §1 ``core/tools``)."""

from core.tools.clock import now_at, now_in, resolve_timezone, timezone_label
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
    "reporting_failures",
    "reporting_failures_all",
    "resolve_timezone",
    "sanitize_tool_name",
    "timezone_label",
    "tool_error_message",
    "tool_failure_text",
]
