"""The kernel's own commands: ``/help``, ``/new``, ``/status``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.extensions.contract import Command, TurnContext
from core.extensions.records import ExtensionStatus

if TYPE_CHECKING:
    from core.kernel.runner import Kernel


def builtin_commands(kernel: Kernel) -> list[Command]:
    async def help_(args: str, turn: TurnContext) -> str:
        return kernel.commands.help_text()

    async def new(args: str, turn: TurnContext) -> str:
        key = kernel.conversations.key(turn.channel_id or "", turn.user_id or "")
        await kernel.conversations.start_new(key)
        return "Started a new conversation; earlier messages are forgotten."

    async def status(args: str, turn: TurnContext) -> str:
        return await status_text(kernel)

    return [
        Command("help", "list the commands", help_),
        Command("new", "start a fresh conversation", new),
        Command("status", "extensions, model, uptime and event counts", status),
    ]


async def status_text(kernel: Kernel) -> str:
    records = kernel.loader.records.values()
    active = sorted(r.ext_id for r in records if r.status is ExtensionStatus.ACTIVE)
    lines = [
        f"Uptime: {_duration(kernel.uptime_s)}",
        f"Model: {kernel.model_router.describe('orchestrator')}",
        f"Extensions active ({len(active)}): {', '.join(active) or 'none'}",
    ]
    for record in sorted(records, key=lambda r: r.ext_id):
        if record.status in (ExtensionStatus.ERROR, ExtensionStatus.SKIPPED):
            lines.append(f"  {record.ext_id}: {record.status.value} — {record.error}")
    lines.extend(_mcp_lines(kernel))
    counts = await kernel.bus.journal.counts()
    lines.append("Events: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def _mcp_lines(kernel: Kernel) -> list[str]:
    statuses = kernel.mcp.statuses()
    if not statuses:
        return []
    connected = sum(s.state == "connected" for s in statuses)
    return [f"MCP servers ({connected}/{len(statuses)} connected):"] + [
        f"  {s.line()}" for s in statuses
    ]


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s"
