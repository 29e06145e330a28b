"""How results look to the user: the follow-up under the answer, and ``/last``.

The follow-up is one message sent right after the answer (ADR 0023): a
``chat_append`` result as a heading and a fenced JSON block (text content as
it is), a ``status_panel`` result as one status line; a failed visible
result as one line with its error. ``silent`` results are never in it. It is
Markdown, so the Telegram channel shows the blocks as code and the CLI
prints them as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from core.extensions.contract import PostProcessResult

__all__ = ["block", "body", "followup_text", "status_line"]

STATUS_WIDTH = 160


def followup_text(results: Sequence[PostProcessResult]) -> str | None:
    """The follow-up message for ``results``, or ``None`` when nothing is visible."""
    parts = []
    for result in results:
        if result.output_target == "chat_append":
            parts.append(block(result) if result.success else _failure(result))
        elif result.output_target == "status_panel":
            parts.append(status_line(result))
    return "\n\n".join(parts) or None


def block(result: PostProcessResult) -> str:
    """``#name`` then the content."""
    return f"#{result.name}\n{body(result)}"


def body(result: PostProcessResult) -> str:
    """The content: fenced JSON, or text as it is."""
    content = result.content
    if isinstance(content, str) and "json" not in result.content_type:
        return content
    return f"```json\n{_pretty(content)}\n```"


def status_line(result: PostProcessResult) -> str:
    """``▸ #name: <the content on one line>`` (or the error), cut to fit a status bar."""
    if not result.success:
        return _failure(result)
    content = result.content
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    line = f"▸ #{result.name}: {' '.join(str(text).split())}"
    return line if len(line) <= STATUS_WIDTH else line[: STATUS_WIDTH - 1] + "…"


def _failure(result: PostProcessResult) -> str:
    return f"▸ #{result.name} failed: {result.error}"


def _pretty(content: Any) -> str:
    return json.dumps(content, indent=2, ensure_ascii=False, default=str)
