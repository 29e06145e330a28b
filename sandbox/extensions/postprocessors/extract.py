"""``#extract``: numbers, percentages and entity names out of the answer (seed 000).

- numbers: ``label: 1,234 unit`` (or ``=``) at the start of a line, after a
  bullet or after a sentence → ``{"label", "value", "unit"}``; whole numbers
  stay integers;
- percentages: every ``87.5%``, as floats, in order, each once;
- entities: upper-case identifiers such as ``CUSTOMER_TABLE`` or
  ``SYS.ADMIN`` (three or more characters), common acronyms (CPU, SQL, …)
  left out, in order, each once.

A param (``numbers``, ``percentages``, ``entities``) keeps only that list;
``source_length`` (the answer's length) is always there.
"""

from __future__ import annotations

import re
from typing import Any

from core.extensions.contract import OutputTarget, PostProcessContext, PostProcessResult

__all__ = ["Extract"]

KINDS = ("numbers", "percentages", "entities")
_UNIT = (
    r"%|[KMGTP]i?B|bytes?|ms|seconds?|secs?|s|minutes?|mins?|hours?|h|days?|rows?|records?"
    r"|items?|connections?|requests?|queries|users?|sessions?|threads?|cores?|nodes?|°C|x"
)
_NUMBER_RE = re.compile(
    r"(?:^|(?<=[.;!?])\s+)[ \t]*(?:[-*•][ \t]+)?"
    r"(?P<label>[A-Za-z][\w /()-]{0,60}?)[ \t]*[:=][ \t]*"
    r"(?P<value>-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)"
    rf"(?:[ \t]*(?P<unit>{_UNIT}))?(?=$|[\s,.;:)])",
    re.MULTILINE,
)
_PERCENT_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)[ \t]?%")
_ENTITY_RE = re.compile(r"\b[A-Z][A-Z0-9_]{2,}(?:\.[A-Z][A-Z0-9_]*)*\b")
COMMON_ACRONYMS = frozenset(
    "API CPU CSS CSV GPU HDD HTML HTTP HTTPS JSON NOTE PDF RAM SQL SSD TODO URL UTC XML YAML "
    "THE AND FOR NOT ALL ANY YES".split()
)


class Extract:
    """Regex extraction of structured data from the answer."""

    name = "extract"
    output_target: OutputTarget = "silent"
    description = "numbers, percentages and entity names from the answer"
    display_name = "Data Extraction"
    category = "Transform"
    version = "1.0.0"
    display_order = 30
    keywords = ("numbers", "percentages", "entities", "extract")
    parameters = {
        "supported": True,
        "description": "keep one list only",
        "examples": ["numbers", "percentages", "entities"],
        "allowed_values": ["numbers", "percentages", "entities"],
    }
    output_schema = {"type": "object", "required": ["source_length"]}

    def validate_param(self, param: str | None) -> tuple[bool, str | None]:
        if param is None or param in KINDS:
            return True, None
        return False, f"unknown kind {param!r}; use numbers, percentages or entities"

    async def execute(self, context: PostProcessContext, param: str | None) -> PostProcessResult:
        text = context.answer_text
        found: dict[str, Any] = {
            "numbers": numbers(text),
            "percentages": _unique(float(m.group(1)) for m in _PERCENT_RE.finditer(text)),
            "entities": _unique(
                m.group(0) for m in _ENTITY_RE.finditer(text) if m.group(0) not in COMMON_ACRONYMS
            ),
        }
        content = {param: found[param]} if param else found
        content["source_length"] = len(text)
        counts = {kind: len(found[kind]) for kind in KINDS}
        return PostProcessResult(self.name, content, metadata={"counts": counts})


def numbers(text: str) -> list[dict[str, Any]]:
    """Every ``label: value unit`` of ``text``, each (label, value) once."""
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, float]] = set()
    for match in _NUMBER_RE.finditer(text):
        raw = match.group("value").replace(",", "")
        value: int | float = float(raw) if "." in raw else int(raw)
        label = match.group("label").strip()
        if (label.lower(), value) in seen:
            continue
        seen.add((label.lower(), value))
        found.append({"label": label, "value": value, "unit": match.group("unit") or ""})
    return found


def _unique(values: Any) -> list[Any]:
    return list(dict.fromkeys(values))
