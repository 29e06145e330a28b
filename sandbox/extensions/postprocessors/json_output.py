"""``#json``: the answer and the turn's metadata as one JSON object (seed 000).

Modes (the seed's table): default — query, answer, session_id, turn_id,
profile_tag, profile_type, provider, model, tokens, tools_used, timestamp;
``minimal`` — query and answer; ``full`` — the default fields plus
execution_trace and collected_data. Shown under the answer.
"""

from __future__ import annotations

from typing import Any

from core.extensions.contract import OutputTarget, PostProcessContext, PostProcessResult

__all__ = ["JsonOutput"]

MODES = ("minimal", "full")


class JsonOutput:
    """Wraps the answer into a standardized JSON structure for workflow tools."""

    name = "json"
    output_target: OutputTarget = "chat_append"
    description = "the answer and the turn's metadata as JSON (minimal, full)"
    display_name = "JSON Output"
    category = "Transform"
    version = "1.0.0"
    display_order = 10
    keywords = ("json", "structured", "n8n", "api")
    parameters = {
        "supported": True,
        "description": "how much of the turn to include",
        "examples": ["minimal", "full"],
        "allowed_values": ["minimal", "full"],
    }
    output_schema = {
        "type": "object",
        "required": ["query", "answer"],
        "properties": {"query": {"type": "string"}, "answer": {"type": "string"}},
    }

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        if param is None or param in MODES:
            return True, None
        return False, f"unknown mode {param!r}; use minimal or full (or nothing)"

    async def execute(self, context: PostProcessContext, param: str | None) -> PostProcessResult:
        content: dict[str, Any] = {"query": context.clean_query, "answer": context.answer_text}
        if param != "minimal":
            content.update(
                session_id=context.session_id,
                turn_id=context.turn_id,
                profile_tag=context.profile_tag,
                profile_type=context.profile_type,
                provider=context.provider,
                model=context.model,
                tokens={
                    "input": context.turn_input_tokens,
                    "output": context.turn_output_tokens,
                    "total_input": context.total_input_tokens,
                    "total_output": context.total_output_tokens,
                },
                tools_used=list(context.tools_used),
                timestamp=context.answered_at,
            )
        if param == "full":
            content["execution_trace"] = [dict(step) for step in context.execution_trace]
            content["collected_data"] = list(context.collected_data)
        return PostProcessResult(self.name, content, metadata={"mode": param or "default"})
