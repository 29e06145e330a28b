"""Tool failures the model can act on: ``Type: message``, one line, secrets redacted.

The SDK turns an exception raised by a ``function_tool`` into its generic "An
error occurred while running the tool", so the model cannot correct a bad
argument; a raw ``FunctionTool`` whose invoker raises even fails the whole run.
Every tool the kernel hands to a model goes through ``reporting_failures``: it
installs ``tool_error_message`` with the SDK's own ``failure_error_function``
mechanism (and catches for raw invokers), so the model reads e.g.
``error: tool book_table failed: ValueError: date must be ISO 8601`` — no
traceback, known secret values replaced by ``***``, at most
``MAX_TOOL_ERROR_CHARS`` characters.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from agents import FunctionTool, RunContextWrapper, Tool, default_tool_error_function
from agents.exceptions import AgentsException
from agents.tool import (
    ToolErrorFunction,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from core.runtime import REDACTOR

__all__ = [
    "MAX_TOOL_ERROR_CHARS",
    "describe_tool_error",
    "propagate_failures",
    "reporting_failures",
    "reporting_failures_all",
    "tool_error_message",
    "tool_failure_text",
]

log = logging.getLogger("core.tools")

MAX_TOOL_ERROR_CHARS = 500
# The SDK marks the invokers it builds (function_tool, MCP tools): they already
# route exceptions through the tool's failure_error_function.
_SDK_INVOKER_MARK = "__agents_bind_function_tool__"


def describe_tool_error(error: BaseException) -> str:
    """``Type: message`` on one line, secrets redacted; never a traceback.

    An SDK wrapper that only adds context around the real error (an MCP call
    failing with a plain exception) is unwrapped to that error.
    """
    if isinstance(error, AgentsException) and isinstance(error.__cause__, Exception):
        error = error.__cause__
    text = " ".join(str(error).split())
    name = type(error).__name__
    return REDACTOR.redact(f"{name}: {text}" if text else name)


def tool_failure_text(tool_name: str | None, detail: str) -> str:
    """``error: tool NAME failed: DETAIL``, secrets redacted, capped."""
    where = f"tool {tool_name} failed: " if tool_name else ""
    return _redacted_and_capped(f"error: {where}{detail}")


def _redacted_and_capped(text: str) -> str:
    text = REDACTOR.redact(text)
    return text if len(text) <= MAX_TOOL_ERROR_CHARS else text[: MAX_TOOL_ERROR_CHARS - 1] + "…"


def tool_error_message(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """A ``failure_error_function``: what the model reads when a tool raised."""
    name = getattr(ctx, "tool_name", None)
    return tool_failure_text(name if isinstance(name, str) else None, describe_tool_error(error))


def _redacting(custom: ToolErrorFunction) -> ToolErrorFunction:
    """An extension's own formatter, with its text redacted and capped like ours."""

    async def format_error(ctx: RunContextWrapper[Any], error: Exception) -> str:
        result = custom(ctx, error)
        if inspect.isawaitable(result):
            result = await result
        return _redacted_and_capped(str(result))

    return format_error


def reporting_failures(tool: Tool) -> Tool:
    """A copy of ``tool`` whose failures reach the model as a short useful message.

    Non-function tools are returned as they are. A tool keeping the SDK's
    default (or no) formatter gets ``tool_error_message``; an extension's own
    formatter is kept, its text redacted and capped.
    """
    if not isinstance(tool, FunctionTool):
        return tool
    current = resolve_function_tool_failure_error_function(tool)
    formatter: ToolErrorFunction = (
        tool_error_message
        if current is None or current is default_tool_error_function
        else _redacting(current)
    )
    guarded = copy.copy(tool)  # the SDK rebinds its invoker to the copy
    set_function_tool_failure_error_function(guarded, formatter)
    if not hasattr(tool.on_invoke_tool, _SDK_INVOKER_MARK):
        guarded.on_invoke_tool = _catching(tool.name, tool.on_invoke_tool, formatter)
    return guarded


def reporting_failures_all(tools: Sequence[Tool]) -> list[Tool]:
    """``reporting_failures`` for each tool, order kept."""
    return [reporting_failures(tool) for tool in tools]


def propagate_failures(tool: Any) -> Any:
    """A copy of a ``function_tool`` that raises instead of hiding the error.

    For the plugin host: the kernel side formats the remote error (and redacts
    with the secrets only it knows), so the host must not swallow it into the
    SDK's generic text first.
    """
    if not isinstance(tool, FunctionTool):
        return tool
    if resolve_function_tool_failure_error_function(tool) is not default_tool_error_function:
        return tool
    raising = copy.copy(tool)
    set_function_tool_failure_error_function(raising, None)
    return raising


def _catching(name: str, invoke: Any, formatter: ToolErrorFunction) -> Any:
    """A raw invoker that reports an exception as the tool's result (cancellation passes)."""

    async def on_invoke(ctx: ToolContext[Any], args: str) -> Any:
        try:
            return await invoke(ctx, args)
        except Exception as exc:
            log.warning("tool %s failed: %s", name, describe_tool_error(exc))
            result = formatter(ctx, exc)
            return await result if inspect.isawaitable(result) else result

    return on_invoke
