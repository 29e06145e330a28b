"""What the model's run tells a post-processor: tokens, tools, their outputs.

Read from the SDK's run result once the turn has its answer: the usage
(input and output tokens over every model call of the turn), the tools
called in order, their outputs (JSON parsed where it parses) and a trace of
calls and outputs. A turn the model did not run (a short circuit) has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents.result import RunResultBase

__all__ = ["RunFacts", "run_facts"]


@dataclass(frozen=True, slots=True)
class RunFacts:
    input_tokens: int = 0
    output_tokens: int = 0
    tools_used: tuple[str, ...] = ()
    collected_data: tuple[Any, ...] = ()
    execution_trace: tuple[dict[str, Any], ...] = ()


def run_facts(result: RunResultBase | None) -> RunFacts:
    """The facts of ``result`` (empty for ``None``)."""
    if result is None:
        return RunFacts()
    usage = result.context_wrapper.usage
    tools: list[str] = []
    names: dict[str, str] = {}
    collected: list[Any] = []
    trace: list[dict[str, Any]] = []
    for item in result.new_items:
        if item.type == "tool_call_item":
            name = str(_field(item.raw_item, "name") or _field(item.raw_item, "type") or "tool")
            call_id = _field(item.raw_item, "call_id")
            tools.append(name)
            if call_id:
                names[str(call_id)] = name
            arguments = _parsed(_field(item.raw_item, "arguments"))
            trace.append({"type": "tool_call", "tool": name, "arguments": arguments})
        elif item.type == "tool_call_output_item":
            call_id = _field(item.raw_item, "call_id")
            name = names.get(str(call_id), "tool")
            output = _parsed(item.output)
            collected.append({"tool": name, "output": output})
            trace.append({"type": "tool_output", "tool": name, "output": output})
    return RunFacts(
        int(usage.input_tokens),
        int(usage.output_tokens),
        tuple(tools),
        tuple(collected),
        tuple(trace),
    )


def _field(raw: Any, key: str) -> Any:
    return raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)


def _parsed(value: Any) -> Any:
    """JSON text as data; other text as it is; anything else as its ``str``."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if value is None or isinstance(value, int | float | bool | list | dict):
        return value
    return str(value)
