"""Render the model's Markdown as Telegram HTML, safely.

Everything is HTML-escaped first; then only balanced constructs become tags:
fenced code blocks, inline code, links, bold, italic, strikethrough, and
headings (shown bold). Code is never formatted inside. Anything the rules
do not recognise stays literal text. Telegram may still reject odd inputs
(e.g. crossed emphasis); the sender then falls back to plain text.
"""

from __future__ import annotations

import html
import re

PARSE_MODE = "HTML"

_FENCE_RE = re.compile(r"^[ \t]*```([^\n`]*)\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.M)
_INLINE_CODE_RE = re.compile(r"`([^`\n]+)`")
_LINK_RE = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+|tg://[^\s)]+)\)")
_BOLD_RE = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__", re.DOTALL)
_ITALIC_RE = re.compile(
    r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])|(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"
)
_STRIKE_RE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING_RE = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_BULLET_RE = re.compile(r"^([ \t]*)[*+-][ \t]+", re.M)
_SLOT = "\x00{}\x00"
_SLOT_RE = re.compile("\x00(\\d+)\x00")


def to_html(markdown: str) -> str:
    """Telegram-HTML for ``markdown`` (tags always balanced)."""
    slots: list[str] = []

    def keep(fragment: str) -> str:
        slots.append(fragment)
        return _SLOT.format(len(slots) - 1)

    text = markdown.replace("\x00", "")
    text = _FENCE_RE.sub(lambda m: keep(_code_block(m.group(1), m.group(2))), text)
    text = _INLINE_CODE_RE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = _LINK_RE.sub(lambda m: keep(_link(m.group(1), m.group(2))), text)
    text = html.escape(text, quote=False)
    text = _HEADING_RE.sub(r"<b>\1</b>", text)
    text = _BULLET_RE.sub(r"\1• ", text)
    text = _BOLD_RE.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC_RE.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE_RE.sub(r"<s>\1</s>", text)
    return _SLOT_RE.sub(lambda m: slots[int(m.group(1))], text)


def _code_block(language: str, body: str) -> str:
    code = html.escape(body.rstrip("\n"), quote=False)
    language = language.strip()
    if re.fullmatch(r"[\w+#.-]{1,20}", language):
        return f'<pre><code class="language-{language}">{code}</code></pre>'
    return f"<pre>{code}</pre>"


def _link(label: str, url: str) -> str:
    return f'<a href="{html.escape(url, quote=True)}">{html.escape(label, quote=False)}</a>'
