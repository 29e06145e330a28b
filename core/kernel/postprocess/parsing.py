"""``#name`` / ``#name:param`` tokens: found, taken out of the text, kept in order.

Only names the user has activated count; any other ``#word`` (a hashtag, an
issue number, ``C#``) stays in the text. A token starts the text or follows
whitespace and ends at whitespace or punctuation; a param is word characters,
``-`` and inner dots (``#extract:numbers``, ``#fmt:v1.2``). Several tokens may
appear anywhere in the message; a name given twice runs once, with the first
token's param. The text the model gets is the message without the tokens
(and the blanks that were around them).

A token of a name the user has not activated stays in the text; when it is
among the tokens that end the message (where post-processor tokens go), its
name is kept in ``unknown`` so the person is told (issue 46) rather than
left wondering why nothing ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["NAME_RE", "PostQuery", "PostSpec", "parse_query"]

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_TOKEN_RE = re.compile(
    r"(?P<lead>^[ \t]*|[ \t]+)#(?P<name>[A-Za-z][\w-]{0,31})"
    r"(?::(?P<param>[\w-]+(?:\.[\w-]+)*))?(?=$|\s|[.,;!?)\]])",
    re.MULTILINE,
)


@dataclass(frozen=True, slots=True)
class PostSpec:
    """One requested post-processor: the activation name and the typed param."""

    name: str
    param: str | None = None

    def label(self) -> str:
        """``#json:minimal`` as the user wrote it (name lowercased)."""
        return f"#{self.name}" if self.param is None else f"#{self.name}:{self.param}"

    def to_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "param": self.param}


@dataclass(frozen=True, slots=True)
class PostQuery:
    """A user message split into what the model sees and what runs afterwards."""

    original: str
    clean: str
    specs: tuple[PostSpec, ...] = ()
    unknown: tuple[str, ...] = ()  # names of trailing tokens not activated


def parse_query(text: str, activated: Callable[[str], bool]) -> PostQuery:
    """Take the tokens of activated names out of ``text``.

    A message that would be left empty (only tokens) is kept as it is, with
    no specs: there is no question to answer, so nothing is post-processed.
    """
    if "#" not in text:
        return PostQuery(text, text)
    specs: dict[str, PostSpec] = {}

    def take(match: re.Match[str]) -> str:
        name = match.group("name").lower()
        if not activated(name):
            return match.group(0)
        specs.setdefault(name, PostSpec(name, match.group("param")))
        return ""

    clean = _TOKEN_RE.sub(take, text).strip()
    unknown = _trailing_unknown(text, activated)
    if not specs or not clean:
        return PostQuery(text, text, unknown=unknown if clean else ())
    return PostQuery(text, clean, tuple(specs.values()), unknown)


def _trailing_unknown(text: str, activated: Callable[[str], bool]) -> tuple[str, ...]:
    """Names of the tokens ending ``text`` (only blanks and punctuation after each)
    that are not activated, in the order written; none when nothing comes before."""
    matches = list(_TOKEN_RE.finditer(text))
    trailing: list[re.Match[str]] = []
    end = len(text)
    for match in reversed(matches):
        if text[match.end() : end].strip(" \t\r\n.,;!?)]"):
            break
        trailing.append(match)
        end = match.start()
    if not text[:end].strip():
        return ()  # only tokens: no message to post-process, nothing to tell
    names = [m.group("name").lower() for m in reversed(trailing)]
    return tuple(dict.fromkeys(n for n in names if not activated(n)))
