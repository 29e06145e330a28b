"""Tools the kernel gives the orchestrator (SPEC §1 ``core/tools``).

The door is lazy (PEP 562): the clock serves ``main.py usage`` without the SDK
the tools are built on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.tool_failures import (
        describe_tool_error as describe_tool_error,
        reporting_failures as reporting_failures,
        reporting_failures_all as reporting_failures_all,
        tool_error_message as tool_error_message,
        tool_failure_text as tool_failure_text,
    )
    from core.extensions.tool_names import sanitize_tool_name as sanitize_tool_name
    from core.tools.clock import (
        now_at as now_at,
        now_in as now_in,
        offset_label as offset_label,
        resolve_timezone as resolve_timezone,
        timezone_label as timezone_label,
    )
    from core.tools.core_tools import build_core_tools as build_core_tools

__getattr__, __dir__ = lazy_door(__name__, globals())
