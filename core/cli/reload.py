"""``main.py extensions reload ID``: ask the running kernel to reload one
extension (ADR 0032), through the event journal in the data dir.

The request is journaled on ``system.kernel.reload`` (in the journal
``storage.backend`` names); the kernel's bus picks it up (it polls for events
written by other processes; on PostgreSQL a NOTIFY wakes it at once), answers ``accepted``
at once and then ``reloaded`` or ``failed`` on ``system.kernel.reload.result``.
No answer within a few poll intervals means no kernel runs on this data dir;
the request carries an expiry, so a kernel started later ignores it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

from core.config import Settings
from core.events.backend import journal_for
from core.events.journal import Journal, NewEvent, WriteBatch
from core.events.system_payloads import KernelReload, KernelReloadResult
from core.events.topics import SystemTopics
from core.runtime import JOURNAL_FILE

__all__ = ["run_reload"]

POLL_S = 0.1


def run_reload(settings: Settings, ext_id: str, *, timeout_s: float) -> int:
    """0: reloaded; 1: the reload failed (the old version keeps running) or no kernel answered."""
    journal_path = settings.data_dir / JOURNAL_FILE
    journal = journal_for(journal_path, settings.events, settings.storage)
    if settings.storage.backend == "sqlite" and not journal_path.is_file():
        print(
            f"hearth: no kernel has run with the data dir {settings.data_dir} "
            f"({journal_path} does not exist); start it with `python main.py`",
            file=sys.stderr,
        )
        return 1
    # the kernel polls the journal every events.poll_interval_s: a few of those
    answer_s = min(timeout_s, 5.0 + 4 * settings.events.poll_interval_s)
    return asyncio.run(_reload(journal, settings.data_dir, ext_id, answer_s, timeout_s))


async def _reload(
    journal: Journal, data_dir: Path, ext_id: str, answer_s: float, timeout_s: float
) -> int:
    await journal.open()
    try:
        request_id = uuid.uuid4().hex
        started = time.monotonic()
        await _publish(
            journal,
            KernelReload(
                request_id=request_id, ext_id=ext_id, expires_at=str(time.time() + answer_s)
            ),
        )
        accepted = False
        while True:
            waited = time.monotonic() - started
            if waited > (timeout_s if accepted else answer_s):
                break
            for result in await _results(journal, request_id):
                if result.outcome == "accepted":
                    accepted = True
                    continue
                print(result.text, file=sys.stdout if result.outcome == "reloaded" else sys.stderr)
                return 0 if result.outcome == "reloaded" else 1
            await asyncio.sleep(POLL_S)
    finally:
        await journal.close()
    if accepted:
        print(
            f"hearth: the kernel took the request but did not finish reloading {ext_id} "
            f"within {timeout_s:g} s; see its log",
            file=sys.stderr,
        )
    else:
        print(
            f"hearth: no running kernel answered within {answer_s:g} s (data dir {data_dir}); "
            "is Hearth running with these settings? In a chat, /reload ID does the same.",
            file=sys.stderr,
        )
    return 1


async def _publish(journal: Journal, request: KernelReload) -> None:
    now = time.time()
    payload = json.dumps(request.to_payload())
    event = NewEvent(request.TOPIC, "main.py extensions reload", payload, None, None, now)
    await journal.commit(WriteBatch(now=now, events=[event]))


async def _results(journal: Journal, request_id: str) -> list[KernelReloadResult]:
    """The answers to ``request_id`` so far, oldest first."""
    records = await journal.recent_events(50, topic=SystemTopics.KERNEL_RELOAD_RESULT)
    answers = [r for r in reversed(records) if r.payload.get("request_id") == request_id]
    return [KernelReloadResult.from_payload(r.payload) for r in answers]
