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
from core.replay.runs import build_any, is_run, list_runs, load_run
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
    if settings.storage.backend == "postgres" and not args.trace:
        raise ReplayError(
            "replay reads the SQLite journal in paths.data; with storage.backend: postgres"
            " the recorded frames are in PostgreSQL, which replay does not read yet"
            " (a trace file replays anywhere: --trace FILE)"
        )
    if args.list:
        listed = [*await list_sessions(journal), *await list_runs(journal)]
        for s in sorted(listed, key=lambda s: s.last_at, reverse=True):
            when = datetime.datetime.fromtimestamp(s.last_at).strftime("%Y-%m-%d %H:%M")
            head = " ".join(s.first_text.split())[:60]
            print(f"{s.session_id}\t{s.turns} {s.unit}\tlast {when}\t{head}")
        return 0
    if args.export:
        session, file = args.export
        trace = await _load(settings, session)
        count = write_trace(trace, Path(file))
        unit = "steps" if trace.run is not None else "turns"
        print(f"{file}: {len(trace.turns)} {unit}, {count} events")
        return 0
    # the kernel and the SDK: only to replay
    from core.cli.replay_driver import replay_trace
    from core.cli.replay_runs import replay_run

    if args.trace:
        trace = read_trace(Path(args.trace), build_any)
    else:
        trace = await _load(settings, args.session)
    if trace.run is not None:
        if args.turn is not None:
            raise ReplayError("--turn is for conversations; a workflow run replays whole")
        report = await replay_run(trace, settings)
    else:
        report = await replay_trace(trace, settings, upto=args.turn)
    print(json.dumps(report.as_dict()) if args.json else describe(report))
    return 0 if report.identical else 1


async def _load(settings: Settings, session: str) -> Trace:
    if is_run(session):  # a workflow run (ADR 0091)
        return await load_run(settings.data_dir / JOURNAL_FILE, session)
    return await load_session(
        settings.data_dir / JOURNAL_FILE,
        settings.data_dir / SESSIONS_FILE,
        session,
        settings.events.retention_days,
    )


def describe(report: ReplayReport) -> str:
    """The report in words: identical, or where and how it diverged (and its notes)."""
    notes = "".join(f"\nnote: {note}" for note in report.notes)
    if report.divergence is None:
        return (
            f"identical: {report.session_id}, {report.turns} {report.unit},"
            f" {report.frames} frames{notes}"
        )
    d = report.divergence
    expected = d.expected["topic"] if d.expected else "no frame"
    got = d.got["topic"] if d.got else "no frame"
    where = f"turn {d.turn}" if d.step is None else f"step {d.turn} ({d.step})"
    return (
        f"diverged: {report.session_id}, {where}, frame {d.frame}: "
        f"expected {expected}, got {got}\n{d.diff}{notes}"
    )
