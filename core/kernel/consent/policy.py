"""Which tool calls run, wait for the user's yes, or never run (SPEC §9, ADR 0021).

The profile gives the default: ``safe`` asks before a tool with side effects
and lets the rest run; ``full_auto`` lets everything run. ``policy.rules``
override it, the most specific matching rule deciding: a rule naming the
tool beats one naming its source (``kv:*``), which beats ``*``; at equal
specificity a rule naming the channel beats one that does not, and a full
tie goes to the stricter action (deny, then ask, then allow). An "always
allow" answer (a grant) turns a question about that tool into a yes; it
never overrides a ``deny``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from core.config import PolicyAction, PolicyRule, PolicySettings

__all__ = [
    "OWNER_TOOLS",
    "STRICTNESS",
    "ConsentPolicy",
    "Grant",
    "GrantBook",
    "ToolInfo",
    "Verdict",
]

STRICTNESS: dict[PolicyAction, int] = {"allow": 0, "ask": 1, "deny": 2}
# sources whose tools write code the kernel loads: approving them is administration
OWNER_TOOLS = frozenset({"builder_agent"})


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """What consent knows of a tool: its name, where it comes from and whether
    it has side effects (and who said so, in plain words)."""

    name: str
    source: str  # an extension id, "core", "mcp:<server>", or "" when unknown
    side_effects: bool
    why: str


@dataclass(frozen=True, slots=True)
class Grant:
    """An "always allow" answer: who gave it, where, and when (epoch seconds)."""

    tool: str
    granted_by: str
    channel_id: str
    created_at: float
    person: str | None = None  # whose answer it is: ``None`` the owner, else a member

    @property
    def key(self) -> str:
        """How it is stored: the tool's name for the owner (the key before people
        existed), ``TOOL@PERSON`` for a member (a tool's name has no ``@``)."""
        return self.tool if self.person is None else f"{self.tool}@{self.person}"

    @classmethod
    def stored(cls, grant: Grant) -> Grant:
        """A grant as read back: its key split into tool and person."""
        tool, _, person = grant.tool.partition("@")
        return cls(tool, grant.granted_by, grant.channel_id, grant.created_at, person or None)


class GrantBook(Protocol):
    """The recorded "always allow" answers (kept in ``sessions.db``)."""

    def grant_for(self, tool: str, person: str | None = None) -> Grant | None: ...


@dataclass(frozen=True, slots=True)
class Verdict:
    """The effective action for one tool on one channel, and why."""

    action: PolicyAction
    reason: str
    source: Literal["profile", "rule", "grant"]


class ConsentPolicy:
    """Decides allow / ask / deny for a tool on a channel (pure; no I/O)."""

    def __init__(self, settings: PolicySettings, grants: GrantBook) -> None:
        self.profile = settings.profile
        self.rules: Sequence[PolicyRule] = tuple(settings.rules)
        self.timeout_s = settings.approval_timeout_s
        self._grants = grants

    def decide(self, tool: ToolInfo, channel_id: str | None, person: str | None = None) -> Verdict:
        """The verdict for a call of ``tool`` made in a turn on ``channel_id`` for
        ``person`` (``TurnContext.person_key``: ``None`` the owner). Only the owner's
        turns run the tools of ``OWNER_TOOLS`` (extensions that change the kernel);
        each person's "always" answers count for their own turns only."""
        if person is not None and (tool.source in OWNER_TOOLS or tool.name in OWNER_TOOLS):
            return Verdict("deny", f"{tool.source} is for the household's owner only", "rule")
        verdict = self._rule_verdict(tool, channel_id) or self._profile_verdict(tool)
        if verdict.action == "ask":
            grant = self._grants.grant_for(tool.name, person)
            if grant is not None:
                return Verdict("allow", f"always allowed by {grant.granted_by}", "grant")
        return verdict

    def _profile_verdict(self, tool: ToolInfo) -> Verdict:
        if self.profile == "full_auto":
            return Verdict("allow", "profile full_auto", "profile")
        if tool.side_effects:
            return Verdict("ask", f"profile safe: side effects ({tool.why})", "profile")
        return Verdict("allow", f"profile safe: no side effects ({tool.why})", "profile")

    def _rule_verdict(self, tool: ToolInfo, channel_id: str | None) -> Verdict | None:
        best: tuple[int, int, int, int] | None = None
        chosen: PolicyRule | None = None
        for index, rule in enumerate(self.rules):
            specificity = _specificity(rule.tool, tool)
            if specificity == 0 or (rule.channel is not None and rule.channel != channel_id):
                continue
            rank = (specificity, rule.channel is not None, STRICTNESS[rule.action], -index)
            if best is None or rank > best:
                best, chosen = rank, rule
        if chosen is None:
            return None
        index = self.rules.index(chosen)
        where = f" on {chosen.channel}" if chosen.channel else ""
        return Verdict(chosen.action, f"rule {index + 1} ({chosen.tool}{where})", "rule")


def _specificity(pattern: str, tool: ToolInfo) -> int:
    """3: the tool's name; 2: its source (``SOURCE:*``); 1: ``*``; 0: no match."""
    if pattern == tool.name:
        return 3
    if pattern == "*":
        return 1
    if pattern.endswith(":*") and tool.source and pattern[:-2] == tool.source:
        return 2
    return 0
