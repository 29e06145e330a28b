"""The conversation's history joins each model request, not the run's input (ADR 0101).

The SDK walks a run's whole input several times per turn before a model sees
it: ``RunState`` deep-copies it, ``input_to_new_input_list`` copies and dumps
it twice, the normaliser visits each item. For a conversation months long that
is ~150 stored items each turn, and a turn at the 250th message cost ~1.5× one
at the 10th. The run is given only the turn's own items; the stored history is
put in front of them at ``RunConfig.call_model_input_filter`` — the SDK's hook
right before each model call — so every request carries the same bytes as
before, the same history objects (the replay recorder matches them by
identity) and the SDK's per-item walks cost what a young conversation's do.

A run paused for approval keeps only its own items in its ``RunState``; its
JSON is marked (``SPLICED``) so the resumption puts the history back, while a
state stored before this change (unmarked, its history inside) is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents import RunConfig
from agents.items import ToolApprovalItem, TResponseInputItem
from agents.run_config import CallModelData, ModelInputData

from core.kernel.postprocess import PostQuery

__all__ = ["SPLICED", "PausedRun", "marked", "unmarked", "with_history"]

SPLICED = "hearth_history_spliced"  # the key in a paused run's state JSON


@dataclass(frozen=True, slots=True)
class PausedRun:
    """A run stopped for the user's approval: the SDK's ``RunState`` as JSON
    (``marked``), the turn's input items (stored in the history once it finishes)
    and the calls waiting (``ToolApprovalItem``, not stored: read them at once)."""

    state: dict[str, Any]
    input_items: list[dict[str, Any]]
    interruptions: list[ToolApprovalItem]
    query: PostQuery | None = None  # the post-processors the message asked for


def with_history(history: Sequence[TResponseInputItem]) -> RunConfig | None:
    """A run config putting ``history`` before each request's input, or None when
    there is none (a first turn: the SDK's default config)."""
    if not history:
        return None
    kept = list(history)

    def splice(call: CallModelData[Any]) -> ModelInputData:
        data = call.model_data
        data.input = [*kept, *data.input]
        return data

    return RunConfig(call_model_input_filter=splice)


def marked(state: dict[str, Any]) -> dict[str, Any]:
    """A paused run's state JSON, marked as holding no history of its own."""
    return {**state, SPLICED: True}


def unmarked(state: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The state JSON as the SDK wrote it, and whether its history must be put back."""
    plain = dict(state)
    return plain, bool(plain.pop(SPLICED, False))
