"""The kernel's metric families (ADR 0028), in one registry per kernel.

Families updated where things happen — tool calls, turns, model tokens,
state sizes — are ``prometheus_client`` metrics owned here. The hot paths —
the bus and the hook calls — keep plain counts (an increment and a
``bisect``, no lock), and the kernel's existing counters (registrations,
state operations, evictions, plugin host restarts) are used as they are: the
collectors of ``collectors.py`` read them at scrape time. A registry per
kernel, not the library's global one, so two kernels in one process (tests,
``main.py extensions``) never mix counts.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any

from agents import Agent, AgentHooks, RunContextWrapper
from agents.items import ModelResponse
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from core.metrics.collectors import CallCounts, CallsCollector, MetricSources, SourcesCollector

if TYPE_CHECKING:  # not at run time: core.kernel imports this module
    from core.kernel.hooks.observer import CallOutcome, ToolOutcome

__all__ = ["BYTE_BUCKETS", "MS_BUCKETS", "SECOND_BUCKETS", "KernelMetrics", "TokenCounter"]

MS_BUCKETS = (
    0.1,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
    60000.0,
    120000.0,
)
# Prometheus names durations in base units (``*_seconds``): the kernel measures in
# milliseconds and each family converts as it observes or exports
SECOND_BUCKETS = tuple(ms / 1000 for ms in MS_BUCKETS)
BYTE_BUCKETS = (256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 10485760)
TURN_STATUSES = ("answered", "short_circuit", "failed", "timeout")
ERROR_STATUSES = frozenset({"failed", "timeout"})


class KernelMetrics:
    """Every family the kernel exports; also the turn path's ``PipelineObserver``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.state_size = Histogram(
            "extension_state_size_bytes",
            "An extension's total state size after each of its writes, in bytes.",
            ["extension_id"],
            buckets=BYTE_BUCKETS,
            registry=r,
        )
        self.tool_calls = Counter(
            "tool_calls_total",
            "Tool calls the model made, by outcome: completed, failed, denied.",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_duration = Histogram(
            "tool_call_duration_seconds",
            "Duration of tool calls (hooks included), in seconds.",
            ["tool"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        self.turns = Counter(
            "turns_total", "Conversational turns by status.", ["status"], registry=r
        )
        self.turn_errors = Counter(
            "turn_errors_total",
            "Turns that ended without the model's answer (failed, timeout).",
            ["status"],
            registry=r,
        )
        self.turn_duration = Histogram(
            "turn_duration_seconds",
            "Duration of conversational turns, in seconds.",
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        self.turn_tokens = Counter(
            "turn_tokens_total",
            "Tokens of the orchestrator's model calls (turns and agent runs), by kind.",
            ["kind"],
            registry=r,
        )
        for status in TURN_STATUSES:  # every series exists from the start, at 0
            self.turns.labels(status)
        for status in ERROR_STATUSES:
            self.turn_errors.labels(status)
        self.token_hooks = TokenCounter(self)
        # hook calls are the hot path here (dozens per turn): plain counts, read at scrape
        self.calls: dict[tuple[str, str], CallCounts] = {}
        self.registry.register(CallsCollector(self.calls, SECOND_BUCKETS))

    def watch(self, sources: MetricSources) -> None:
        """Export the counters the kernel's parts keep themselves (read at scrape time)."""
        self.registry.register(SourcesCollector(sources))

    def exposition(self) -> bytes:
        """The Prometheus text format of every family."""
        return generate_latest(self.registry)

    # ------------------------------------------------------------ PipelineObserver

    def callback(self, hook: str, owner: str, duration_ms: float, outcome: CallOutcome) -> None:
        counts = self.calls.get((hook, owner))
        if counts is None:
            counts = self.calls[hook, owner] = CallCounts(len(MS_BUCKETS))
        counts.buckets[bisect_left(MS_BUCKETS, duration_ms)] += 1
        counts.sum_ms += duration_ms
        counts.outcomes[outcome] = counts.outcomes.get(outcome, 0) + 1

    def tool_call(self, tool: str, duration_ms: float, outcome: ToolOutcome) -> None:
        self.tool_calls.labels(tool, outcome).inc()
        self.tool_duration.labels(tool).observe(duration_ms / 1000)

    def turn(self, status: str, duration_ms: float) -> None:
        self.turns.labels(status).inc()
        self.turn_duration.observe(duration_ms / 1000)
        if status in ERROR_STATUSES:
            self.turn_errors.labels(status).inc()

    # ------------------------------------------------------------ other sources

    def state_written(self, ext_id: str, size_bytes: int) -> None:
        """``StateStore``'s report after a write: the extension's state size now."""
        self.state_size.labels(ext_id).observe(size_bytes)

    def tokens(self, input_tokens: int, output_tokens: int) -> None:
        self.turn_tokens.labels("input").inc(max(input_tokens, 0))
        self.turn_tokens.labels("output").inc(max(output_tokens, 0))


class TokenCounter(AgentHooks[Any]):
    """The orchestrator agent's hooks: counts the tokens of each model response."""

    def __init__(self, metrics: KernelMetrics) -> None:
        self._metrics = metrics

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        usage = response.usage
        self._metrics.tokens(usage.input_tokens, usage.output_tokens)
