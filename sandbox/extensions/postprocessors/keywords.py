"""Whole-word keyword counting shared by ``#decision`` and ``#classify``.

A keyword matches as a word, case-insensitively, with a common inflection
(``crash`` → ``crashed``, ``error`` → ``errors``) but not inside another word
(``down`` never matches ``download``). A phrase (``below threshold``) matches
with any whitespace between its words.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["count_keywords"]


@functools.cache
def _pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for the whole list: one scan of the text per list."""
    alternatives = "|".join(
        r"\s+".join(re.escape(word) for word in keyword.split()) for keyword in keywords
    )
    return re.compile(rf"\b(?:{alternatives})(?:s|es|d|ed|ing)?\b", re.IGNORECASE)


def count_keywords(text: str, keywords: Sequence[str]) -> int:
    """How many times any of ``keywords`` occurs in ``text``."""
    return len(_pattern(tuple(keywords)).findall(text))
