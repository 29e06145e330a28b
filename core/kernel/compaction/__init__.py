"""History compaction (ADR 0020): a conversation's history kept within its budget."""

from core.kernel.compaction.budget import (
    CHARS_PER_TOKEN,
    SUMMARY_HEADER,
    HistoryBudget,
    choose_cut,
    estimate_tokens,
    summary_item,
)
from core.kernel.compaction.compactor import HistoryCompactor
from core.kernel.compaction.summariser import (
    COMPACTION_INSTRUCTIONS,
    ModelSummariser,
    Summarise,
    transcript,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "COMPACTION_INSTRUCTIONS",
    "SUMMARY_HEADER",
    "HistoryBudget",
    "HistoryCompactor",
    "ModelSummariser",
    "Summarise",
    "choose_cut",
    "estimate_tokens",
    "summary_item",
    "transcript",
]
