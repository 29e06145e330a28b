"""Tools the kernel itself gives the orchestrator (the model reads the docstrings)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents import FunctionTool, function_tool

from core.extensions.sdk import side_effects
from core.extensions.tool_failures import tool_error_message
from core.tools.clock import now_in, resolve_timezone, timezone_label

__all__ = ["build_core_tools"]

ListExtensions = Callable[[], list[dict[str, Any]]]
RequestRestart = Callable[[str], None]
_EXTENSION_FIELDS = ("id", "status", "error")


def build_core_tools(
    *,
    timezone: str,
    list_extensions: ListExtensions,
    request_restart: RequestRestart,
) -> list[FunctionTool]:
    """``current_time``, ``list_extensions`` and ``request_restart``, bound to the kernel."""
    resolve_timezone(timezone)  # raises ValueError naming a bad timezone, at load

    def current_time() -> str:
        """Current date and time in the user's timezone (ISO 8601, with the weekday).

        Use it for anything relative to now: "tomorrow", "in two hours", "what day is it".
        """
        now = now_in(timezone)
        return json.dumps(
            {
                "now": now.isoformat(timespec="seconds"),
                "weekday": now.strftime("%A"),
                "timezone": timezone_label(timezone, now),
            }
        )

    def list_extensions_tool() -> str:
        """List the assistant's extensions with their status (active, error, skipped, disabled).

        Use it when the user asks what the assistant can do or why a feature is not working;
        `error` says why an extension failed.
        """
        rows = [{key: row.get(key) for key in _EXTENSION_FIELDS} for row in list_extensions()]
        return json.dumps(rows, ensure_ascii=False)

    def request_restart_tool(reason: str) -> str:
        """Restart the assistant's kernel (it comes back within seconds; history is kept).

        Only when the user asks for it, e.g. after changing settings or extensions.

        Args:
            reason: Why the restart is needed, in a few words (it is logged).
        """
        request_restart(reason)
        return "restart requested; the assistant will be back in a few seconds"

    # consent (docs/consent.md): reading the clock or the extension list changes
    # nothing; a restart interrupts the assistant, so it has side effects
    return [
        side_effects(function_tool(current_time, failure_error_function=tool_error_message), False),
        side_effects(
            function_tool(
                list_extensions_tool,
                name_override="list_extensions",
                failure_error_function=tool_error_message,
            ),
            False,
        ),
        side_effects(
            function_tool(
                request_restart_tool,
                name_override="request_restart",
                failure_error_function=tool_error_message,
            ),
            True,
        ),
    ]
