"""The kernel's own commands: ``/help``, ``/new``, ``/status``, ``/pair``.

They see the kernel only through ``StatusSource`` and ``ConversationStore``,
so what ``/status`` reports is exactly what the kernel exposes for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from core.agents.mcp_servers import McpServerStatus
from core.extensions.context.status_lines import collect_status_lines
from core.extensions.contract import Command, TurnContext
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
from core.extensions.sdk import admit_anywhere
from core.kernel.shaping.tool_stacking import StackedTools


class ConversationStore(Protocol):
    """What ``/new`` needs: a conversation key and a way to start over."""

    def key(self, channel_id: str, user_id: str) -> str: ...

    async def start_new(self, key: str) -> str: ...


class StatusSource(Protocol):
    """What ``/status`` reports: uptime, model, wired extensions, tool stacks, MCP, events."""

    @property
    def uptime_s(self) -> float: ...

    def model_description(self) -> str: ...

    def extension_records(self) -> Sequence[ExtensionRecord]: ...

    def is_wired(self, ext_id: str) -> bool: ...

    def mcp_statuses(self) -> Sequence[McpServerStatus]: ...

    async def event_counts(self) -> dict[str, int]: ...

    def tool_stacks(self) -> StackedTools: ...

    def consent_summary(self) -> str: ...


SessionEnded = Callable[[TurnContext, str], Awaitable[None]]


async def _nothing(turn: TurnContext, reason: str) -> None:
    return None


def builtin_commands(
    *,
    help_text: Callable[[], str],
    conversations: ConversationStore,
    status: StatusSource,
    on_session_end: SessionEnded = _nothing,
) -> list[Command]:
    """``/help``, ``/new`` (which tells ``on_session_end`` the old session ended,
    reason ``new``), ``/status`` and ``/pair`` (the owner's only: the command table
    refuses it to members; the channel that gave the code admits its holder)."""

    async def help_(args: str, turn: TurnContext) -> str:
        return help_text()

    async def new(args: str, turn: TurnContext) -> str:
        key = conversations.key(turn.channel_id or "", turn.user_id or "")
        await conversations.start_new(key)
        await on_session_end(turn, "new")
        return "Started a new conversation; earlier messages are forgotten."

    async def status_(args: str, turn: TurnContext) -> str:
        return await status_text(status)

    async def pair(args: str, turn: TurnContext) -> str:
        words = args.split()
        if len(words) not in (1, 2) or words[1:] not in ([], ["member"]):
            return "Usage: /pair CODE [member]"
        return await admit_anywhere(words[0])

    return [
        Command("help", "list the commands", help_),
        Command("new", "start a fresh conversation", new),
        Command("status", "extensions, model, uptime and event counts", status_),
        Command("pair", "admit someone given a pairing code on any channel: /pair CODE", pair),
    ]


async def status_text(source: StatusSource) -> str:
    """``Extensions active`` lists the wired extensions: the ones getting traffic."""
    records = sorted(source.extension_records(), key=lambda r: r.ext_id)
    active = [r.ext_id for r in records if source.is_wired(r.ext_id)]
    lines = [
        f"Uptime: {_duration(source.uptime_s)}",
        f"Model: {source.model_description()}",
        f"Extensions active ({len(active)}): {', '.join(active) or 'none'}",
    ]
    for record in records:
        if record.status in (ExtensionStatus.ERROR, ExtensionStatus.SKIPPED):
            lines.append(f"  {record.ext_id}: {record.status.value} — {record.error}")
    wired = [r for r in records if source.is_wired(r.ext_id)]
    for ext_id, own in (await collect_status_lines(wired)).items():
        lines.extend(f"  {ext_id}: {line}" for line in own)
    contested = source.tool_stacks().contested()
    if contested:
        lines.append("Tools with several providers (active first):")
        lines.extend(f"  {stack.describe()}" for stack in contested)
    lines.extend(_mcp_lines(source.mcp_statuses()))
    lines.append(source.consent_summary())
    counts = await source.event_counts()
    lines.append("Events: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def _mcp_lines(statuses: Sequence[McpServerStatus]) -> list[str]:
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
