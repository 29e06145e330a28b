"""Who keeps a command name two extensions both provide (issue 11 item 6), and
the trust facts tool stacking builds on (``stacking.py``, ADR 0027).

Load order no longer decides: the established provider keeps the name —
the kernel's own names always, then bundled (project-granted) extensions,
then extensions granted earlier. A newcomer takes a name only when the
user's grant says it replaces it ("replaces `remember` from memory").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

KERNEL_OWNERS = frozenset({"kernel", "core"})

# ext id -> rank (smaller = more established; None = holds no grant)
RankOf = Callable[[str], float | None]
# ext id -> {name: extension it may take the name from}
ReplacesOf = Callable[[str], dict[str, str]]


class NamePolicy:
    """Decides the keeper of a contested name and words the warning."""

    def __init__(self, rank: RankOf, replaces: ReplacesOf) -> None:
        self._rank = rank
        self._replaces = replaces

    def keeper(self, name: str, holder: str, newcomer: str) -> str:
        """The owner that keeps ``name`` (``/cmd`` for commands, bare for tools)."""
        if holder in KERNEL_OWNERS:
            return holder
        if newcomer in KERNEL_OWNERS:
            return newcomer
        if self._replaces(newcomer).get(name) == holder:
            return newcomer
        if self._replaces(holder).get(name) == newcomer:
            return holder
        return newcomer if self._order(newcomer) < self._order(holder) else holder

    def may_replace(self, owner: str, name: str) -> bool:
        """Whether the user's grant lets ``owner`` take ``name`` from another provider."""
        return name in self._replaces(owner)

    def established(self, owners: Sequence[str]) -> str:
        """The most established of ``owners`` (the kernel, then bundled, then the
        earliest grant; ties: the first in ``owners``, i.e. load order)."""
        return min(owners, key=lambda owner: (self.order(owner), owners.index(owner)))

    def order(self, owner: str) -> float:
        """When ``owner`` became a provider: the kernel first (-inf), bundled (0),
        then grant time; an extension holding no grant last (inf)."""
        if owner in KERNEL_OWNERS:
            return -math.inf
        return self._order(owner)

    def _order(self, owner: str) -> float:
        rank = self._rank(owner)
        return math.inf if rank is None else rank

    def warning(self, name: str, keeper: str, loser: str) -> str:
        """One line naming both extensions and why the name stays where it is."""
        if self._replaces(keeper).get(name) == loser:
            return f"extension {keeper}: takes {name} from {loser} (its grant says it replaces it)"
        return (
            f"extension {loser}: {name} is already provided by {keeper}; "
            "not replacing it without a grant that says so"
        )
