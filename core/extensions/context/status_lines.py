"""What ``StatusReporter`` extensions say about themselves, for ``doctor`` and ``/status``.

One place asks them all, each under a short deadline, so a slow or broken
extension costs one line ("status unavailable: ...") and never the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from core.extensions.loading.capabilities import Capability
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.records import ExtensionRecord

__all__ = ["STATUS_TIMEOUT_S", "collect_status_lines"]

STATUS_TIMEOUT_S = 3.0
MAX_LINES = 10
MAX_LINE_CHARS = 200  # a line of /status, not a payload


async def collect_status_lines(
    records: Iterable[ExtensionRecord], timeout_s: float = STATUS_TIMEOUT_S
) -> dict[str, list[str]]:
    """``ext_id -> lines`` of every active ``StatusReporter``, asked concurrently."""
    reporters = [r for r in records if r.has(Capability.STATUS) and r.instance is not None]
    answers = await asyncio.gather(*(_ask(r, timeout_s) for r in reporters))
    return {r.ext_id: lines for r, lines in zip(reporters, answers, strict=True) if lines}


async def _ask(record: ExtensionRecord, timeout_s: float) -> list[str]:
    try:
        async with asyncio.timeout(timeout_s):
            lines = await record.instance.status_lines()
    except TimeoutError:
        return [f"status unavailable: no answer within {timeout_s:g} s"]
    except Exception as exc:
        return [f"status unavailable: {describe_exception(exc)}"]
    return [_one_line(line) for line in list(lines)[:MAX_LINES]]


def _one_line(line: object) -> str:
    """Whitespace folded; cut at ``MAX_LINE_CHARS`` (an ellipsis says so)."""
    text = " ".join(str(line).split())
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"
