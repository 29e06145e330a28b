"""The history budget, and where a compaction may cut the history.

The budget is ``turns.history_max_items`` and ``turns.history_max_tokens``;
tokens are *estimated* as the characters of the items' stored JSON divided
by ``CHARS_PER_TOKEN`` (4) — no tokenizer, the same for every model, and
SQLite can sum it without decoding an item. A cut starts the kept part at a
user message, so a tool call and its result always stay on the same side,
and it is checked on top: the kept part never holds a tool result whose call
is cut off (the APIs reject such a history).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.config import TurnsSettings
from core.kernel.conversations.ledger import StoredItem

__all__ = [
    "CHARS_PER_TOKEN",
    "SUMMARY_HEADER",
    "HistoryBudget",
    "choose_cut",
    "estimate_tokens",
    "summary_item",
]

CHARS_PER_TOKEN = 4
SUMMARY_HEADER = "[Summary of the earlier conversation]"


def estimate_tokens(chars: int) -> float:
    """The token estimate of ``chars`` characters of item JSON."""
    return chars / CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class HistoryBudget:
    """Limits on the stored history, and the share of them a compaction keeps."""

    max_items: int | None
    max_tokens: int | None
    keep_fraction: float

    @classmethod
    def from_settings(cls, turns: TurnsSettings) -> HistoryBudget:
        return cls(
            turns.history_max_items, turns.history_max_tokens, turns.compaction_keep_fraction
        )

    @property
    def limited(self) -> bool:
        """Whether there is any budget at all (both ``null``: the history grows freely)."""
        return self.max_items is not None or self.max_tokens is not None

    def exceeded(self, items: int, chars: int) -> bool:
        """Whether a history of this size must be compacted."""
        return (self.max_items is not None and items > self.max_items) or (
            self.max_tokens is not None and estimate_tokens(chars) > self.max_tokens
        )

    def keeps(self, items: int, chars: int) -> bool:
        """Whether the newest ``items`` may stay whole: within ``keep_fraction`` of each limit."""
        return (self.max_items is None or items <= self.max_items * self.keep_fraction) and (
            self.max_tokens is None
            or estimate_tokens(chars) <= self.max_tokens * self.keep_fraction
        )


def choose_cut(items: Sequence[StoredItem], budget: HistoryBudget) -> int:
    """The index of the first kept item (``len(items)``: keep none, summarise all).

    The oldest user message whose suffix fits the keep share and holds no
    orphaned tool result; at least the first item is always summarised.
    """
    cut = len(items)
    kept_chars = 0
    unanswered: set[str] = set()  # call ids of kept tool results whose call is not kept (yet)
    for index in range(len(items) - 1, 0, -1):
        item = items[index].item
        kept_chars += items[index].chars
        if not budget.keeps(len(items) - index, kept_chars):
            break
        kind, call_id = item.get("type"), item.get("call_id")
        if isinstance(kind, str) and isinstance(call_id, str):
            if kind.endswith("_call_output"):
                unanswered.add(call_id)
            elif kind.endswith("_call"):
                unanswered.discard(call_id)
        if item.get("role") == "user" and not unanswered:
            cut = index
    return cut


def summary_item(text: str) -> dict[str, Any]:
    """The one item that stands for the summarised part of the history.

    A user message: every model API accepts it anywhere in the input (a
    second system message is refused by some chat templates), and the
    history still starts at a user message (``trim_to_user_turn``).
    """
    return {"role": "user", "content": f"{SUMMARY_HEADER}\n{text}"}
