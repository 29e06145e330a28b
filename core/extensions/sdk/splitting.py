"""Split a reply into pieces a chat platform takes (each channel gives its limit).

Length is counted in UTF-16 code units, as Telegram counts it; that is never
fewer than characters, so a piece fits a platform counting characters too
(Discord, Slack, Matrix). Cuts are
made at a paragraph break if one is in reach, else a line break, else a
space, else anywhere. A cut inside a fenced code block closes the fence at
the end of the piece and reopens it (with its language) in the next, so
every piece renders on its own.
"""

from __future__ import annotations

import re

__all__ = ["split_text", "utf16_len"]

_FENCE_RE = re.compile(r"^\s*```(\S*)")
_CLOSE = "\n```"
_MAX_LANG = 20


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (Telegram's count; at least the characters)."""
    return len(text.encode("utf-16-le")) // 2


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of ``text`` of at most ``limit`` UTF-16 units; ``[]`` for blank text."""
    if limit <= len(_CLOSE) + 8 + _MAX_LANG:
        raise ValueError(f"limit {limit} is too small to split text")
    if not text.strip():
        return []
    pieces: list[str] = []
    rest = text.lstrip("\n").rstrip()  # the platforms trim the ends anyway
    prefix = ""
    while True:
        candidate = prefix + rest
        if utf16_len(candidate) <= limit:
            pieces.append(candidate)
            return pieces
        cut = _find_cut(candidate, limit - len(_CLOSE), len(prefix))
        piece = candidate[:cut].rstrip()
        language = _open_fence(piece)
        if language is not None:
            piece += _CLOSE
            prefix = f"```{language[:_MAX_LANG]}\n"
        else:
            prefix = ""
        pieces.append(piece)
        rest = candidate[cut:].lstrip("\n" if candidate[cut - 1 : cut] != " " else " \n")
        if not rest.strip():
            return pieces


def _find_cut(text: str, limit: int, min_index: int) -> int:
    """Index to cut at: the last good boundary that keeps the head within ``limit``.

    A paragraph break in the second half of the window beats a line break
    there, which beats a space; only if none is there do earlier ones count.
    """
    end = _fitting_prefix(text, limit)
    window = text[:end]
    for floor in (max(min_index, end // 2), min_index):
        for boundary in ("\n\n", "\n", " "):
            at = window.rfind(boundary)
            if at > floor:
                return at + len(boundary)
    return end


def _fitting_prefix(text: str, limit: int) -> int:
    """The largest ``i`` with ``utf16_len(text[:i]) <= limit``."""
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return index
    return len(text)


def _open_fence(piece: str) -> str | None:
    """The language of a code fence left open at the end of ``piece`` ("" if none given)."""
    language: str | None = None
    for line in piece.splitlines():
        match = _FENCE_RE.match(line)
        if match:
            language = match.group(1) if language is None else None
    return language
