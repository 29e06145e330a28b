"""``doctor``'s model lines: each agent's fallback chain, fallbacks that cannot be
used, and — from the running kernel's metrics snapshot — which models served
and which cool down (ADR 0061). The breakers live in the kernel process; the
snapshot (``<data>/metrics.prom``, rewritten every ``metrics.snapshot_interval_s``)
is how another process sees them.
"""

from __future__ import annotations

import re
from collections import defaultdict

from core.agents.model_router import ModelRouter
from core.config import Settings
from core.metrics import read_snapshot

__all__ = ["model_lines"]

_SAMPLE = re.compile(r"^(hearth_model_\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def model_lines(settings: Settings, router: ModelRouter) -> list[tuple[bool, str]]:
    """(ok, line) for the model part of ``doctor``."""
    lines: list[tuple[bool, str]] = []
    for agent_id in sorted(settings.models.agents):
        lines.append(
            (router.is_configured(agent_id), f"model {agent_id}: {router.describe(agent_id)}")
        )
    lines += [(False, f"fallback left out: {problem}") for problem in router.fallback_problems()]
    snapshot = read_snapshot(settings.data_dir)
    if snapshot is None:
        return lines
    body, age = snapshot
    served, cooling = _running_state(body.decode(errors="replace"))
    when = f"kernel metrics {age:.0f} s old"
    if served:
        counts = ", ".join(f"{m} {n:g}" for m, n in sorted(served.items()))
        lines.append((True, f"models served since the kernel started ({when}): {counts}"))
    for model, seconds in sorted(cooling.items()):
        lines.append((True, f"model {model} was cooling down, {seconds:.0f} s left ({when})"))
    return lines


def _running_state(text: str) -> tuple[dict[str, float], dict[str, float]]:
    served: dict[str, float] = defaultdict(float)
    cooling: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name, labels, value = match.group(1), dict(_LABEL.findall(match.group(2))), match.group(3)
        model = labels.get("model", "")
        if name == "hearth_model_calls_total" and labels.get("outcome") == "ok" and float(value):
            served[model] += float(value)
        elif name == "hearth_model_cooling_seconds" and float(value) > 0:
            cooling[model] = float(value)
    return dict(served), cooling
