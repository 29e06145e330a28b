"""Tags in the model's answer, rendered by the extensions that registered them.

``<name attr="v">inner</name>`` (or ``<name …/>``) whose name a tag hook
registered is parsed into a tree; unregistered tags are plain text. Each
registered element is rendered innermost first — its ``inner`` is the text
with its own registered children already rendered — by every hook whose
patterns match, in priority order, chained: a hook receives the previous
hook's result as ``inner``. The last result replaces the whole section; an
element no hook changed keeps its tags around the rendered inner text. A
tag that is never closed, or closed out of order, is left as text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["TAG_TOKEN", "Element", "parse_tags", "render_tags"]

_NAME = r"[A-Za-z_][\w.:-]*"
TAG_TOKEN = re.compile(
    rf"<(?P<close>/)?(?P<name>{_NAME})(?P<attrs>(?:\s+{_NAME}\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)"
    r"\s*(?P<self>/)?>"
)
_ATTR = re.compile(rf"({_NAME})\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")

# Renders one element: (tag, attrs, inner) -> replacement, or None to keep the tags
RenderOne = Callable[[str, dict[str, str], str], Awaitable[str | None]]


@dataclass(slots=True)
class Element:
    """One registered tag section: its opening and closing text and its children."""

    name: str
    attrs: dict[str, str]
    open_text: str
    close_text: str = ""
    children: list[str | Element] = field(default_factory=list)


def parse_tags(text: str, registered: Callable[[str], bool]) -> list[str | Element]:
    """Split ``text`` into plain strings and elements of registered tags."""
    root: list[str | Element] = []
    stack: list[Element] = []

    def sink() -> list[str | Element]:
        return stack[-1].children if stack else root

    position = 0
    for match in TAG_TOKEN.finditer(text):
        name = match.group("name")
        if not registered(name):
            continue
        sink().append(text[position : match.start()])
        position = match.end()
        token = match.group(0)
        if match.group("close"):
            if any(e.name == name for e in stack):
                while stack[-1].name != name:  # unclosed children inside: plain text
                    _flatten_top(stack)
                element = stack.pop()
                element.close_text = token
                sink().append(element)
            else:
                sink().append(token)
        elif match.group("self"):
            sink().append(Element(name, _attrs(match.group("attrs")), token))
        else:
            stack.append(Element(name, _attrs(match.group("attrs")), token))
    sink().append(text[position:])
    while stack:
        _flatten_top(stack, root)
    return root


def _flatten_top(stack: list[Element], root: list[str | Element] | None = None) -> None:
    """An element that never closed becomes its opening text followed by its children."""
    element = stack.pop()
    parent = stack[-1].children if stack else root
    assert parent is not None
    parent.append(element.open_text)
    parent.extend(element.children)


def _attrs(raw: str) -> dict[str, str]:
    return {
        m.group(1): html.unescape(m.group(2) if m.group(2) is not None else m.group(3))
        for m in _ATTR.finditer(raw or "")
    }


async def render_tags(text: str, registered: Callable[[str], bool], render_one: RenderOne) -> str:
    """``text`` with every registered element rendered, innermost first."""
    if "<" not in text:
        return text
    return await _render(parse_tags(text, registered), render_one)


async def _render(nodes: Sequence[str | Element], render_one: RenderOne) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            parts.append(node)
            continue
        inner = await _render(node.children, render_one)
        replaced = await render_one(node.name, node.attrs, inner)
        if replaced is None:
            parts.append(f"{node.open_text}{inner}{node.close_text}")
        else:
            parts.append(replaced)
    return "".join(parts)
