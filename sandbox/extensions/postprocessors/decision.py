"""``#decision``: a branch for workflow switches, from signal keywords (seed 000).

Signals (the seed's table) are counted as whole words. The severity is the
strongest one present (critical, then warning, then ok; none: ``info``).
``result`` is ``threshold_exceeded`` for critical signals (and, with the
``warning`` param, for warning ones too), ``approaching_threshold`` for
warning signals, else ``nominal``; ``branch_key`` is ``<result>_<severity>``.
``action_recommended`` when there are action signals or the severity is
critical or warning. ``confidence`` starts at 0.5 and grows 0.12 per signal
of the chosen severity and 0.04 per action signal backing a problem, loses
0.08 per ``ok`` signal contradicting one, within 0.5–0.95. ``binary`` gives
``yes``/``no``: whether action is recommended.
"""

from __future__ import annotations

from typing import Any

from core.extensions.contract import OutputTarget, PostProcessContext, PostProcessResult

from .keywords import count_keywords

__all__ = ["SIGNALS", "Decision"]

SIGNALS: dict[str, tuple[str, ...]] = {
    "critical": ("critical", "urgent", "failure", "down", "outage", "crash", "exceeded"),
    "warning": ("warning", "elevated", "approaching", "degraded", "slow", "spike"),
    "ok": ("normal", "healthy", "stable", "optimal", "below threshold"),
    "action": ("recommend", "should", "suggest", "action required"),
}
MODES = ("binary", "critical", "warning")
BASE, PER_SIGNAL, PER_ACTION, PER_CONTRADICTION, CEILING = 0.5, 0.12, 0.04, 0.08, 0.95


class Decision:
    """Heuristic keyword analysis that gives a branch key for n8n Switch nodes."""

    name = "decision"
    output_target: OutputTarget = "silent"
    description = "a branch key from the answer's signal words (binary, critical, warning)"
    display_name = "Decision"
    category = "Automation"
    version = "1.0.0"
    display_order = 20
    keywords = ("branch", "switch", "severity", "n8n", "workflow")
    parameters = {
        "supported": True,
        "description": "what counts as a threshold crossed",
        "examples": ["binary", "critical", "warning"],
        "allowed_values": ["binary", "critical", "warning"],
    }
    output_schema = {
        "type": "object",
        "required": ["result", "action_recommended", "branch_key"],
        "properties": {"branch_key": {"type": "string"}},
    }

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        if param is None or param in MODES:
            return True, None
        return False, f"unknown mode {param!r}; use binary, critical or warning (or nothing)"

    async def execute(self, context: PostProcessContext, param: str | None) -> PostProcessResult:
        answer = context.answer_text
        counts = {kind: count_keywords(answer, words) for kind, words in SIGNALS.items()}
        severity = next((s for s in ("critical", "warning", "ok") if counts[s]), "info")
        action = counts["action"] > 0 or severity in ("critical", "warning")
        mode = param or "critical"
        if mode == "binary":
            verdict = "yes" if action else "no"
            content: dict[str, Any] = {
                "result": verdict,
                "action_recommended": action,
                "branch_key": verdict,
            }
        else:
            result = _result(severity, mode)
            content = {
                "result": result,
                "severity": severity,
                "confidence": _confidence(severity, counts),
                "action_recommended": action,
                "branch_key": f"{result}_{severity}",
                "signal_counts": counts,
                "reasoning": f"Analyzed {len(answer)} chars",
            }
        return PostProcessResult(self.name, content, metadata={"mode": mode})


def _result(severity: str, mode: str) -> str:
    if severity == "critical" or (severity == "warning" and mode == "warning"):
        return "threshold_exceeded"
    if severity == "warning":
        return "approaching_threshold"
    return "nominal"


def _confidence(severity: str, counts: dict[str, int]) -> float:
    if severity == "info":
        return BASE
    score = BASE + PER_SIGNAL * counts[severity]
    if severity != "ok":
        score += PER_ACTION * counts["action"] - PER_CONTRADICTION * counts["ok"]
    return round(min(max(score, BASE), CEILING), 2)
