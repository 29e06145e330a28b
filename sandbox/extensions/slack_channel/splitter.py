"""Split a reply into Slack-sized pieces (at most ``MAX_MESSAGE_CHARS`` each).

Slack takes up to 40,000 characters in a message but shows long ones cut
behind "Show more" and advises 4,000; a piece is at most 3,900 so the
formatting added to it still fits. Cuts are made at a paragraph break if one
is in reach, else a line break, else a space, else anywhere. A cut inside a
fenced code block closes the fence at the end of the piece and reopens it in
the next, so every piece renders on its own.
"""

from __future__ import annotations

import re

MAX_MESSAGE_CHARS = 3900
_FENCE_RE = re.compile(r"^\s*```")
_CLOSE = "\n```"
_OPEN = "```\n"


def split_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Pieces of ``text`` of at most ``limit`` characters; ``[]`` for blank text."""
    if limit <= 4 * len(_CLOSE):
        raise ValueError(f"limit {limit} is too small to split text")
    if not text.strip():
        return []
    pieces: list[str] = []
    rest = text.lstrip("\n").rstrip()
    prefix = ""
    while True:
        candidate = prefix + rest
        if len(candidate) <= limit:
            pieces.append(candidate)
            return pieces
        cut = _find_cut(candidate, limit - len(_CLOSE), len(prefix))
        piece = candidate[:cut].rstrip()
        if _fence_open(piece):
            piece += _CLOSE
            prefix = _OPEN
        else:
            prefix = ""
        pieces.append(piece)
        rest = candidate[cut:].lstrip("\n" if candidate[cut - 1 : cut] != " " else " \n")
        if not rest.strip():
            return pieces


def _find_cut(text: str, limit: int, min_index: int) -> int:
    """Index to cut at: the last good boundary that keeps the head within ``limit``;
    a paragraph break in the second half beats a line break there, which beats a space."""
    window = text[:limit]
    for floor in (max(min_index, limit // 2), min_index):
        for boundary in ("\n\n", "\n", " "):
            at = window.rfind(boundary)
            if at > floor:
                return at + len(boundary)
    return limit


def _fence_open(piece: str) -> bool:
    """Whether a code fence is left open at the end of ``piece``."""
    return sum(1 for line in piece.splitlines() if _FENCE_RE.match(line)) % 2 == 1
