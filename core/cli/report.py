"""``main.py extensions``: load every extension, report, shut them down.

Extensions are initialized (not started) against a throw-away journal, so
the report never writes into the user's event journal.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from core.config import Settings
from core.extensions.context.status_lines import collect_status_lines
from core.kernel.runner import kernel_apart
from core.kernel.shaping.tool_stacking import stacks_by_extension


def run_extensions_report(settings: Settings, *, as_json: bool) -> int:
    report = asyncio.run(collect_report(settings))
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0


async def collect_report(settings: Settings) -> list[dict[str, Any]]:
    async with kernel_apart(settings, "report") as kernel:
        await kernel.load()
        stacks = stacks_by_extension(kernel.tool_stacking.stacked(kernel.loader.active()))
        said = await collect_status_lines(kernel.loader.records.values())
        report = kernel.loader.report()
        for entry in report:
            entry["tool_stacks"] = stacks.get(entry["id"], {})
            entry["status_lines"] = said.get(entry["id"], [])
        return report


def format_report(report: list[dict[str, Any]]) -> str:
    if not report:
        return "no extensions found"
    width = max(len(r["id"]) for r in report)
    lines = []
    for r in report:
        caps = ", ".join(r["capabilities"]) or "-"
        lines.append(f"{r['id']:<{width}}  {r['status']:<8}  {caps}")
        if r["tools"]:
            lines.append(f"{'':<{width}}  tools: {', '.join(r['tools'])}")
        for name, stack in r.get("tool_stacks", {}).items():
            if stack["active"] != r["id"]:
                by = f"by {stack['active']}" if stack["active"] else "(disabled)"
                lines.append(f"{'':<{width}}  tool {name}: shadowed {by}")
        lines.extend(f"{'':<{width}}  {line}" for line in r.get("status_lines", []))
        if r["error"]:
            lines.append(f"{'':<{width}}  error: {r['error']}")
    return "\n".join(lines)
