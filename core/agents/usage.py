"""What a turn cost in tokens: the one shape the ledger, metrics, ``/usage`` and the
HTTP API's ``usage`` share (SPEC §11).

The SDK sums every model response of a run into ``context_wrapper.usage``;
``usage_of`` reads that sum once, so each consumer counts the same tokens —
input, the part of it the server served from its prompt cache, and output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NO_USAGE", "TurnUsage", "usage_of"]


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """Tokens of one turn, summed over its model calls (``requests``)."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TurnUsage) -> TurnUsage:
        return TurnUsage(
            self.input_tokens + other.input_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
        )


NO_USAGE = TurnUsage()


def usage_of(run: Any) -> TurnUsage:
    """The summed usage of an SDK run result (``RunResultBase``); ``NO_USAGE`` for
    none (a hook's short circuit, a failed turn) or a model that reported none."""
    usage = getattr(getattr(run, "context_wrapper", None), "usage", None)
    if usage is None:
        return NO_USAGE
    details = getattr(usage, "input_tokens_details", None)
    cached = getattr(details, "cached_tokens", 0) or 0
    return TurnUsage(
        int(usage.input_tokens or 0),
        int(cached),
        int(usage.output_tokens or 0),
        int(usage.requests or 0),
    )
