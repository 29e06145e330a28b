"""What the turn path reports for metrics: hook calls and tool calls (a turn's end
reaches metrics as a ``TurnObserver``, ``core/agents/observer.py``).

The hook caller, the tool interceptor and the turn hooks call an observer
after each call; the kernel's is ``core.metrics.KernelMetrics``. The default
does nothing, so the pipeline runs the same without metrics (unit tests,
benchmarks) and does not depend on the metrics library.
"""

from __future__ import annotations

from typing import Literal, Protocol

__all__ = ["NO_OBSERVER", "CallOutcome", "PipelineObserver", "ToolOutcome"]

CallOutcome = Literal["ok", "error", "timeout", "cancelled"]
ToolOutcome = Literal["completed", "failed", "denied"]


class PipelineObserver(Protocol):
    """Told about each call once it is over; must be cheap and never raise."""

    def callback(self, hook: str, owner: str, duration_ms: float, outcome: CallOutcome) -> None:
        """One hook call of ``owner`` (an extension id or a command hook's name)."""
        ...

    def tool_call(self, tool: str, duration_ms: float, outcome: ToolOutcome) -> None:
        """One tool call the model made, hooks included (``denied``: not run)."""
        ...


class _NoObserver:
    def callback(self, hook: str, owner: str, duration_ms: float, outcome: CallOutcome) -> None:
        return None

    def tool_call(self, tool: str, duration_ms: float, outcome: ToolOutcome) -> None:
        return None


NO_OBSERVER: PipelineObserver = _NoObserver()
