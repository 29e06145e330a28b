"""``main.py events``: look into the journal, list dead letters, re-queue one.

Works on the journal file directly (no running kernel needed, and safe while
one runs: WAL lets readers in while the kernel writes), or on the PostgreSQL
database ``storage.postgres_dsn`` names; a re-queue there wakes the running
kernels at once (NOTIFY).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from core.events.errors import JournalError
from core.events.journal import DeadLetter, EventRecord, Journal
from core.events.sqlite_journal import SQLiteJournal

__all__ = ["run_events_command"]


async def run_events_command(journal: Path | Journal, args: argparse.Namespace) -> int:
    """Run ``main.py events`` against the SQLite file ``journal`` or the given journal
    (PostgreSQL: ``storage.backend``); returns the exit code."""
    if isinstance(journal, Path):
        if not await asyncio.to_thread(journal.is_file):
            print(
                f"event journal {journal} does not exist (has the kernel run yet?)",
                file=sys.stderr,
            )
            return 1
        journal = SQLiteJournal(journal)
    if args.limit < 1:
        print(f"--limit must be at least 1, got {args.limit}", file=sys.stderr)
        return 1
    try:
        if args.requeue is not None:
            return await _requeue(journal, args.requeue, args.subscriber, args.json)
        if args.dead:
            letters = await journal.dead_letters(limit=args.limit)
            _print_dead(letters, args.json)
        else:
            records = await journal.recent_events(limit=args.limit, topic=args.topic)
            _print_events(records, args.json)
    except JournalError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


async def _requeue(journal: Journal, event_id: int, subscriber: str | None, as_json: bool) -> int:
    count = await journal.requeue(event_id, subscriber)
    who = f" for subscriber {subscriber!r}" if subscriber else ""
    if as_json:
        print(json.dumps([{"event_id": event_id, "subscriber": subscriber, "requeued": count}]))
    elif count:
        print(
            f"re-queued {count} dead deliver{'y' if count == 1 else 'ies'} of event {event_id}{who}"
        )
    else:
        print(f"event {event_id} has no dead delivery{who}; nothing re-queued", file=sys.stderr)
    return 0 if count else 1


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    ]
    return "\n".join(lines)


def _print_events(records: list[EventRecord], as_json: bool) -> None:
    if as_json:
        print(json.dumps([asdict(r) for r in records], ensure_ascii=False))
        return
    if not records:
        print("no events")
        return
    rows = [
        [
            str(r.id),
            _when(r.created_at),
            r.topic,
            r.source,
            " ".join(f"{d.subscriber_id}:{d.status}/{d.attempt}" for d in r.deliveries) or "-",
        ]
        for r in records
    ]
    print(
        _table(["ID", "TIME", "TOPIC", "SOURCE", "DELIVERIES (subscriber:status/attempts)"], rows)
    )


def _print_dead(letters: list[DeadLetter], as_json: bool) -> None:
    if as_json:
        print(json.dumps([asdict(d) for d in letters], ensure_ascii=False))
        return
    if not letters:
        print("no dead letters")
        return
    rows = [
        [
            str(d.event_id),
            _when(d.failed_at),
            d.topic,
            d.subscriber_id,
            str(d.attempt),
            (d.error or "").replace("\n", " "),
        ]
        for d in letters
    ]
    print(_table(["ID", "FAILED", "TOPIC", "SUBSCRIBER", "ATTEMPTS", "ERROR"], rows))
