"""Which hooks run at each hook point, in the documented order.

Order (seed 001 "Extension Priority"): manifest ``priority`` descending
(0–100, default 50), equal priorities in load order; ``hooks.commands``
entries take their own ``priority`` and come after extensions of the same
priority. The table is rebuilt lazily after the wiring changes, so a turn
pays one dictionary lookup per hook point — and a point with no hooks is an
empty tuple, checked before anything else is done.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.extensions.contract import TagHook
from core.extensions.loading.capabilities import HOOKS, Capability, hook_capability
from core.extensions.loading.records import ExtensionRecord

__all__ = ["HookEntry", "HookRegistry", "TagPatterns"]

DEFAULT_PRIORITY = 50

# the hook points called here
_TAG = hook_capability(TagHook)


@dataclass(frozen=True, slots=True)
class TagPatterns:
    """A tag hook's patterns: exact names and ``prefix*`` prefixes."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, patterns: Sequence[str]) -> TagPatterns:
        exact: set[str] = set()
        prefixes: list[str] = []
        for raw in patterns:
            pattern = str(raw).strip()
            if pattern.endswith("*"):
                prefixes.append(pattern[:-1])
            elif pattern:
                exact.add(pattern)
        return cls(frozenset(exact), tuple(prefixes))

    def matches(self, tag: str) -> bool:
        return tag in self.exact or any(tag.startswith(p) for p in self.prefixes)


@dataclass(frozen=True, slots=True)
class HookEntry:
    """One hook implementation: who owns it, where it sorts, what to call."""

    owner: str  # an extension id, or ``command:<name>`` for ``hooks.commands``
    priority: int
    order: int
    target: Any
    tags: TagPatterns = field(default_factory=TagPatterns)
    matcher: re.Pattern[str] | None = None  # command hooks: tool names they apply to
    timeout_s: float | None = None  # command hooks: their own deadline (else hooks.timeout_s)

    def applies_to_tool(self, name: str) -> bool:
        return self.matcher is None or self.matcher.search(name) is not None


ExtraHooks = Callable[[], Sequence[tuple[Capability, HookEntry]]]


class HookRegistry:
    """The ordered hook entries per point, from the wired extensions plus extras."""

    def __init__(
        self,
        records: Callable[[], Sequence[ExtensionRecord]],
        *,
        extra: ExtraHooks = lambda: (),
    ) -> None:
        self._records = records
        self._extra = extra
        self._table: dict[Capability, tuple[HookEntry, ...]] | None = None

    def invalidate(self) -> None:
        """The wiring changed: rebuild on next use."""
        self._table = None

    def at(self, point: Capability) -> tuple[HookEntry, ...]:
        """The entries for ``point`` in call order (empty when none)."""
        table = self._table
        if table is None:
            table = self._table = self._build()
        return table.get(point, ())

    def owners(self) -> list[str]:
        """Every owner with at least one hook (``/status``, docs, tests)."""
        table = self._table if self._table is not None else self._build()
        return sorted({e.owner for entries in table.values() for e in entries})

    def _build(self) -> dict[Capability, tuple[HookEntry, ...]]:
        found: dict[Capability, list[HookEntry]] = {}
        order = 0
        for record in self._records():
            points = [c for c in record.capabilities if c in HOOKS]
            if not points:
                continue
            priority = record.manifest.priority if record.manifest else DEFAULT_PRIORITY
            tags = TagPatterns()
            if _TAG in points:
                tags = TagPatterns.parse(list(getattr(record.instance, "tag_patterns", ()) or ()))
            for point in points:
                entry = HookEntry(record.ext_id, priority, order, record.instance, tags)
                found.setdefault(point, []).append(entry)
            order += 1
        for point, entry in self._extra():
            found.setdefault(point, []).append(replace(entry, order=order + entry.order))
        return {
            point: tuple(sorted(entries, key=lambda e: (-e.priority, e.order)))
            for point, entries in found.items()
        }
