"""What a turn's run leaves to keep: its ``RunState``'s context as JSON (a paused
turn survives a restart) and its new items as history input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from agents.items import TResponseInputItem
from agents.result import RunResultBase

from core.extensions.contract import TurnContext

__all__ = ["new_history_items", "turn_from_json", "turn_to_json"]


def turn_to_json(context: Any) -> Mapping[str, Any]:
    """A run's ``TurnContext`` as the ``RunState`` JSON stores it."""
    return asdict(context) if isinstance(context, TurnContext) else {}


def turn_from_json(data: Mapping[str, Any]) -> TurnContext:
    """The ``TurnContext`` back from a stored ``RunState`` (unknown keys dropped)."""
    known = {f.name for f in fields(TurnContext)}
    return TurnContext(**{k: v for k, v in data.items() if k in known})


def new_history_items(result: RunResultBase) -> list[TResponseInputItem]:
    """The run's new items as history input, as an SDK session would store them
    (``save_result_to_session``): approvals skipped, a ``status: None`` dropped.

    ``result.to_input_list()`` gives the same items after the whole input, but
    re-converts the entire history on every turn; this converts only the new ones."""
    items: list[TResponseInputItem] = []
    for run_item in result.new_items:
        if run_item.type == "tool_approval_item":
            continue
        item: Any = run_item.to_input_item()
        if isinstance(item, dict) and "status" in item and item["status"] is None:
            item = {k: v for k, v in item.items() if k != "status"}
        items.append(item)
    return items
