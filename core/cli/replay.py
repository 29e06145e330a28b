"""``main.py replay`` (SPEC §10): list, replay, export and replay a trace file.

Exit codes: 0 identical (and for ``--list`` / ``--export``), 1 diverged,
2 when there is nothing to replay (unknown conversation, purged frames, a bad
trace file).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import Settings
from core.replay.errors import ReplayError
from core.replay.trace import Trace, list_sessions, load_session, read_trace, write_trace
from core.runtime import JOURNAL_FILE, SESSIONS_FILE

if TYPE_CHECKING:
    from core.cli.replay_driver import ReplayReport

__all__ = ["describe", "run_replay_command"]


def run_replay_command(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(settings, args))
    except ReplayError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"status": "error", "error": str(exc)}))
        else:
            print(f"hearth replay: {exc}", file=sys.stderr)
        return 2


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    journal = settings.data_dir / JOURNAL_FILE
    if args.list:
        for s in await list_sessions(journal):
            when = datetime.datetime.fromtimestamp(s.last_at).strftime("%Y-%m-%d %H:%M")
            head = " ".join(s.first_text.split())[:60]
            print(f"{s.session_id}\t{s.turns} turns\tlast {when}\t{head}")
        return 0
    if args.export:
        session, file = args.export
        trace = await _load(settings, session)
        count = write_trace(trace, Path(file))
        print(f"{file}: {len(trace.turns)} turns, {count} events")
        return 0
    from core.cli.replay_driver import replay_trace  # the kernel and the SDK: only to replay

    trace = read_trace(Path(args.trace)) if args.trace else await _load(settings, args.session)
    report = await replay_trace(trace, settings, upto=args.turn)
    print(json.dumps(report.as_dict()) if args.json else describe(report))
    return 0 if report.identical else 1


async def _load(settings: Settings, session: str) -> Trace:
    return await load_session(
        settings.data_dir / JOURNAL_FILE,
        settings.data_dir / SESSIONS_FILE,
        session,
        settings.events.retention_days,
    )


def describe(report: ReplayReport) -> str:
    """The report in words: identical, or where and how it diverged."""
    if report.divergence is None:
        return f"identical: {report.session_id}, {report.turns} turns, {report.frames} frames"
    d = report.divergence
    expected = d.expected["topic"] if d.expected else "no frame"
    got = d.got["topic"] if d.got else "no frame"
    return (
        f"diverged: {report.session_id}, turn {d.turn}, frame {d.frame}: "
        f"expected {expected}, got {got}\n{d.diff}"
    )
