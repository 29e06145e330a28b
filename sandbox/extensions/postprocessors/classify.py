"""``#classify``: the answer's category, by keyword score (seed 000).

Each category's keywords (the seed's table) are counted as whole words; the
category with most hits wins (ties: the table's order) and ``branch_key`` is
its name. ``confidence`` is 0.5 plus 0.4 times the winner's share of all
hits; with no hit the answer is ``informational`` at 0.5. ``all_categories``
lists the categories that scored, highest first. No params.
"""

from __future__ import annotations

from typing import Any

from core.extensions.contract import OutputTarget, PostProcessContext, PostProcessResult

from .keywords import count_keywords

__all__ = ["CATEGORIES", "Classify"]

CATEGORIES: dict[str, tuple[str, ...]] = {
    "alert": ("critical", "urgent", "failure", "down", "outage", "crash", "error"),
    "performance": ("cpu", "memory", "disk", "throughput", "latency", "slow", "bottleneck"),
    "data_quality": ("missing", "null", "duplicate", "invalid", "quality", "corrupt"),
    "capacity": ("storage", "space", "growth", "forecast", "full", "quota"),
    "security": ("access", "permission", "unauthorized", "breach", "audit"),
    "data_report": ("rows", "records", "table", "column", "query", "result", "count"),
}
FALLBACK = "informational"
BASE, SPREAD = 0.5, 0.4


class Classify:
    """Keyword-scoring classification into predefined categories."""

    name = "classify"
    output_target: OutputTarget = "silent"
    description = "the answer's category (alert, performance, capacity, …)"
    display_name = "Classification"
    category = "Automation"
    version = "1.0.0"
    display_order = 40
    keywords = ("category", "classify", "routing", "n8n")
    parameters = {"supported": False}
    output_schema = {
        "type": "object",
        "required": ["primary_category", "confidence", "branch_key"],
    }

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        if param is None:
            return True, None
        return False, f"#classify takes no param (got {param!r})"

    async def execute(self, context: PostProcessContext, param: str | None) -> PostProcessResult:
        scores = {
            category: hits
            for category, words in CATEGORIES.items()
            if (hits := count_keywords(context.answer_text, words))
        }
        ranked = dict(sorted(scores.items(), key=lambda item: -item[1]))  # stable: table order
        if ranked:
            primary = next(iter(ranked))
            confidence = round(BASE + SPREAD * ranked[primary] / sum(ranked.values()), 2)
        else:
            primary, confidence = FALLBACK, BASE
        content: dict[str, Any] = {
            "primary_category": primary,
            "confidence": confidence,
            "all_categories": ranked,
            "branch_key": primary,
            "query": context.clean_query,
        }
        return PostProcessResult(self.name, content)
