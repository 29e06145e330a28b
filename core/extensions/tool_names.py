"""What a tool may be called: the model APIs accept ``[a-zA-Z0-9_-]{1,64}``.

Both the toolset (naming an agent wrapped as a tool) and the loader (checking
a manifest's ``tools:`` declarations against the names an extension really
provides) need the same rule, so it lives here, below both.
"""

from __future__ import annotations

import re

__all__ = ["sanitize_tool_name"]

_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")
_MAX_NAME = 64


def sanitize_tool_name(name: str, fallback: str) -> str:
    """A name the model APIs accept: ``[a-zA-Z0-9_-]{1,64}``."""
    cleaned = _INVALID_NAME_CHARS.sub("_", name.strip()).strip("_")
    return (cleaned or fallback)[:_MAX_NAME]
