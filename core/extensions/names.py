"""Who keeps a tool or command name two extensions both provide (issue 11 item 6).

Load order no longer decides: the established provider keeps the name —
the kernel's own names always, then bundled (project-granted) extensions,
then extensions granted earlier. A newcomer takes a name only when the
user's grant says it replaces it ("replaces `remember` from memory").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

KERNEL_OWNERS = frozenset({"kernel", "core"})

T = TypeVar("T")

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


def settle(
    sources: Sequence[tuple[str, Sequence[T]]],
    name_of: Callable[[T], str],
    policy: NamePolicy,
    warn: Callable[[str], None],
) -> list[tuple[str, list[T]]]:
    """``(owner, items)`` with every contested name left only to its keeper."""
    keepers: dict[str, str] = {}
    for owner, items in sources:
        for item in items:
            name = name_of(item)
            holder = keepers.get(name)
            if holder is None or holder == owner:
                keepers[name] = owner
                continue
            keeper = policy.keeper(name, holder, owner)
            warn(policy.warning(name, keeper, owner if keeper == holder else holder))
            keepers[name] = keeper
    return [
        (owner, [item for item in items if keepers[name_of(item)] == owner])
        for owner, items in sources
    ]
