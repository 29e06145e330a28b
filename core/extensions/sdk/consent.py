"""Declaring a tool's side effects (consent, SPEC §9, docs/consent.md).

A side effect is an action outside Hearth's own data or one that cannot be
undone (writing code, restarting, calling out to another system). A tool
that says nothing counts as side-effecting, so under the ``safe`` profile
the user is asked before it runs. The manifest's ``tools.<name>.
side_effects`` overrides what the tool says.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["SIDE_EFFECTS_ATTR", "side_effects"]

SIDE_EFFECTS_ATTR = "side_effects"
T = TypeVar("T")


def side_effects(tool: T, value: bool) -> T:
    """Mark ``tool`` (an ``agents.FunctionTool``) as having side effects or not; returns it.

    ``side_effects(function_tool(kv_get), False)`` lets ``kv_get`` run without
    asking; isolated extensions' tools carry the mark across the boundary.
    """
    setattr(tool, SIDE_EFFECTS_ATTR, bool(value))
    return tool
