"""Render the model's Markdown as Slack ``mrkdwn``, safely.

``&``, ``<`` and ``>`` are escaped first (Slack reads ``<...>`` as links and
mentions, so a model cannot ping ``<!channel>``); then only balanced
constructs are converted: ``**bold**`` to ``*bold*``, ``*italic*`` to
``_italic_``, ``~~strike~~`` to ``~strike~``, ``[label](https://...)`` to
``<https://...|label>``, headings to bold lines. Code (fenced and inline) is
left as it is: Slack renders the same backticks.
"""

from __future__ import annotations

import re

_FENCE_RE = re.compile(r"^[ \t]*```[^\n`]*\n.*?(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.M)
_INLINE_CODE_RE = re.compile(r"`[^`\n]+`")
_LINK_RE = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)|>]+)\)")
_BOLD_RE = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__", re.DOTALL)
_ITALIC_RE = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE_RE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING_RE = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_BULLET_RE = re.compile(r"^([ \t]*)[*+-][ \t]+", re.M)
_BOLD_MARK = "\x01"
_SLOT = "\x00{}\x00"
_SLOT_RE = re.compile("\x00(\\d+)\x00")


def escape(text: str) -> str:
    """Text shown verbatim in Slack (its three control characters escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Slack mrkdwn for ``markdown``."""
    slots: list[str] = []

    def keep(fragment: str) -> str:
        slots.append(fragment)
        return _SLOT.format(len(slots) - 1)

    text = markdown.replace("\x00", "").replace(_BOLD_MARK, "")
    text = _FENCE_RE.sub(lambda m: keep(escape(m.group(0))), text)
    text = _INLINE_CODE_RE.sub(lambda m: keep(escape(m.group(0))), text)
    text = _LINK_RE.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1))}>"), text)
    text = escape(text)
    text = _HEADING_RE.sub(lambda m: f"{_BOLD_MARK}{m.group(1)}{_BOLD_MARK}", text)
    text = _BULLET_RE.sub("\\1• ", text)
    text = _BOLD_RE.sub(lambda m: f"{_BOLD_MARK}{m.group(1) or m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_RE.sub(r"_\1_", text)
    text = _STRIKE_RE.sub(r"~\1~", text)
    text = text.replace(_BOLD_MARK, "*")
    return _SLOT_RE.sub(lambda m: slots[int(m.group(1))], text)
