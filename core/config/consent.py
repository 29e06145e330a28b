"""The ``policy:`` section of ``settings.yaml``: consent (SPEC §9, docs/consent.md).

Its own module so ``core/config/settings.py`` stays one screenful per section; the
models forbid unknown keys like every settings model.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PolicyAction", "PolicyRule", "PolicySettings", "check_tool_name", "check_tool_pattern"]

_TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


PolicyAction = Literal["allow", "ask", "deny"]


class PolicyRule(_Section):
    """One consent rule (``policy.rules``, docs/consent.md): what to do when the
    model calls a matching tool, optionally only on one channel.

    ``tool`` is a tool's name (``kv_set``), every tool of one source
    (``kv:*`` an extension's, ``core:*`` the kernel's, ``mcp:github:*`` one
    MCP server's), or ``*`` (every tool).
    """

    tool: str = Field(min_length=1)
    action: PolicyAction
    channel: str | None = Field(default=None, min_length=1)

    @field_validator("tool")
    @classmethod
    def _pattern_fits(cls, value: str) -> str:
        check_tool_pattern(value)
        return value


def check_tool_name(name: str) -> None:
    """``ValueError`` unless ``name`` can be a tool's name (letters, digits, _ and -)."""
    if not _TOOL_NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a tool name (letters, digits, _ and -)")


def check_tool_pattern(pattern: str) -> None:
    """``ValueError`` unless ``pattern`` is ``*``, a tool name, or ``SOURCE:*``."""
    if pattern == "*":
        return
    body = pattern[:-2] if pattern.endswith(":*") else pattern
    if not body or "*" in body or any(ch.isspace() for ch in body):
        raise ValueError(
            f"{pattern!r} must be a tool name (kv_set), a source's tools (kv:*, core:*, "
            "mcp:SERVER:*) or * (every tool)"
        )


class PolicySettings(_Section):
    """Consent (SPEC §9, docs/consent.md): which tool calls need the user's yes."""

    # safe: tools with side effects ask first, the rest run; full_auto: everything runs
    profile: Literal["safe", "full_auto"] = "safe"
    rules: list[PolicyRule] = Field(default_factory=list)
    approval_timeout_s: float = Field(default=600.0, gt=0)  # unanswered → denied
    # the person running Hearth says which tools have side effects (by name); this
    # beats every manifest and tool (docs/consent.md, ADR 0044)
    side_effects: dict[str, bool] = Field(default_factory=dict)

    @field_validator("side_effects")
    @classmethod
    def _tool_names(cls, value: dict[str, bool]) -> dict[str, bool]:
        for name in value:
            check_tool_name(name)
        return value
