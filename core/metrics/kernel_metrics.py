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
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.agents.fallback import ModelHealth
from core.agents.observer import QuietObserver
from core.agents.usage import TurnUsage
from core.agents.usage_meter import UsageMeter
from core.metrics.collectors import CallCounts, CallsCollector, MetricSources, SourcesCollector

if TYPE_CHECKING:  # not at run time: core.kernel imports this module
    from core.extensions.contract import TurnContext, TurnOutcome
    from core.kernel.hooks.observer import CallOutcome, ToolOutcome

__all__ = ["BYTE_BUCKETS", "MS_BUCKETS", "SECOND_BUCKETS", "TOKEN_KINDS", "KernelMetrics"]

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
TOKEN_KINDS = ("input", "cached", "output")  # cached: the part of input served from cache
MODEL_OUTCOMES = ("ok", "failed", "skipped")


class KernelMetrics(QuietObserver):
    """Every family the kernel exports; also the turn path's ``PipelineObserver`` and
    one of its ``TurnObserver``s."""

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
        self.model_tokens = Counter(
            "hearth_model_tokens_total",
            "Tokens of the kernel's model calls (turns and agent runs), by kind (input, "
            "cached: the part of input the server had cached, output) and serving model.",
            ["kind", "model"],
            registry=r,
        )
        self.model_calls = Counter(
            "hearth_model_calls_total",
            "Model calls by model and outcome: ok, failed (fell over to the next model, "
            "or the last one failed), skipped (cooling down).",
            ["model", "outcome"],
            registry=r,
        )
        self.workflow_runs = Counter(
            "hearth_workflow_runs_total",
            "Workflow runs by event: started, succeeded, failed (ADR 0091).",
            ["workflow", "event"],
            registry=r,
        )
        self.workflow_steps = Histogram(
            "hearth_workflow_step_duration_seconds",
            "Duration of workflow steps that act (tool, agent, ask, notify), in seconds.",
            ["workflow"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        for status in TURN_STATUSES:  # every series exists from the start, at 0
            self.turns.labels(status)
        for status in ERROR_STATUSES:
            self.turn_errors.labels(status)
        # hook calls are the hot path here (dozens per turn): plain counts, read at scrape
        self.calls: dict[tuple[str, str], CallCounts] = {}
        self.registry.register(CallsCollector(self.calls, SECOND_BUCKETS))

    def workflow(self, event: str, workflow: str, seconds: float | None = None) -> None:
        """A run started, succeeded or failed, or a step took ``seconds`` (``step``)."""
        if event == "step":
            self.workflow_steps.labels(workflow).observe(seconds or 0.0)
        else:
            self.workflow_runs.labels(workflow, event).inc()

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

    # ------------------------------------------------------------ TurnObserver
    # only the turn's end: tokens are counted for every run (``TokenCounter``), tool
    # calls with their hooks and denials (``tool_call``)

    async def turn_ended(self, turn: TurnContext, outcome: TurnOutcome) -> None:
        status, duration_ms = outcome.status, outcome.duration_ms
        self.turns.labels(status).inc()
        self.turn_duration.observe(duration_ms / 1000)
        if status in ERROR_STATUSES:
            self.turn_errors.labels(status).inc()

    # ------------------------------------------------------------ other sources

    def state_written(self, ext_id: str, size_bytes: int) -> None:
        """``StateStore``'s report after a write: the extension's state size now."""
        self.state_size.labels(ext_id).observe(size_bytes)

    def tokens(self, model: str, usage: TurnUsage) -> None:
        """One model response's tokens (``UsageMeter``'s observer)."""
        counts = (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens)
        for kind, count in zip(TOKEN_KINDS, counts, strict=True):
            self.model_tokens.labels(kind, model).inc(max(count, 0))

    def model_call(self, model: str, outcome: str) -> None:
        """One attempt of a fallback chain (``ModelHealth``'s observer)."""
        self.model_calls.labels(model, outcome).inc()

    def watch_models(self, health: ModelHealth, meter: UsageMeter) -> None:
        """Count each model response's tokens and each attempt of a fallback chain;
        export ``hearth_model_cooling_seconds`` from the breakers."""
        meter.observers.append(self.tokens)
        health.observers.append(self.model_call)
        self.registry.register(_CoolingCollector(health.cooling_models))


class _CoolingCollector(Collector):
    def __init__(self, cooling: Callable[[], Mapping[str, tuple[float, str]]]) -> None:
        self._cooling = cooling

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "hearth_model_cooling_seconds",
            "Seconds a model that failed is still skipped by its fallback chains.",
            labels=["model"],
        )
        for model, (seconds, _error) in self._cooling().items():
            family.add_metric([model], seconds)
        yield family
