"""``main.py events``: the inspection command, run against a real journal file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from core.cli.arguments import build_parser
from core.events import Event, EventBus, Journal, SQLiteJournal
from core.events.cli import run_events_command
from support.bus_helpers import JournalFactory, eventually


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["events", *argv])


@pytest.fixture
async def journal_with_dead_letter(
    make_journal: JournalFactory,
) -> tuple[Path | Journal, int, int]:
    """The journal as ``main.py events`` is given it: the SQLite file's path, or the
    PostgreSQL journal ``storage.postgres_dsn`` names."""
    bus = EventBus(make_journal(), max_attempts=1)

    async def fail(event: Event) -> None:
        raise RuntimeError("mail server down")

    async def ok(event: Event) -> None:
        return None

    bus.subscribe("mail.*", fail, "mailer")
    bus.subscribe("*", ok, "audit")
    await bus.start()
    good = await bus.publish("note.saved", "notes", {"text": "hi"})
    bad = await bus.publish("mail.send", "mail", {"to": "me"})
    await eventually(bus.journal.dead_letters)
    await bus.stop()
    target = Path(make_journal.location) if make_journal.backend == "sqlite" else make_journal()
    return target, good, bad


async def test_lists_recent_events_as_table_and_json(
    journal_with_dead_letter: tuple[Path | Journal, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, good, bad = journal_with_dead_letter
    assert await run_events_command(path, _args()) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["ID", "TIME", "TOPIC", "SOURCE"]
    assert out[1].startswith(str(bad)) and "mail.send" in out[1]
    assert "audit:done/1" in out[1] and "mailer:dead/1" in out[1]
    assert "note.saved" in out[2]

    assert await run_events_command(path, _args("--json", "--topic", "note.saved")) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["topic"], r["payload"]) for r in rows] == [
        (good, "note.saved", {"text": "hi"})
    ]
    assert rows[0]["deliveries"] == [
        {"subscriber_id": "audit", "status": "done", "attempt": 1, "error": None}
    ]


async def test_dead_letters_and_requeue(
    journal_with_dead_letter: tuple[Path | Journal, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, bad = journal_with_dead_letter
    assert await run_events_command(path, _args("--dead")) == 0
    out = capsys.readouterr().out
    assert "mailer" in out and "RuntimeError: mail server down" in out

    assert await run_events_command(path, _args("--requeue", str(bad), "--subscriber", "x")) == 1
    assert "nothing re-queued" in capsys.readouterr().err
    assert await run_events_command(path, _args("--requeue", str(bad))) == 0
    assert f"re-queued 1 dead delivery of event {bad}" in capsys.readouterr().out
    assert await run_events_command(path, _args("--dead", "--json")) == 0
    assert json.loads(capsys.readouterr().out) == []
    journal = SQLiteJournal(path) if isinstance(path, Path) else path
    assert (await journal.counts())["pending"] == 1


async def test_missing_journal_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope" / "events.db"
    assert await run_events_command(missing, _args()) == 1
    assert f"event journal {missing} does not exist" in capsys.readouterr().err
    assert not missing.exists()


async def test_a_file_that_is_not_a_journal_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "events.db"
    bogus.write_text("this is not sqlite\n" * 100)
    assert await run_events_command(bogus, _args()) == 1
    assert str(bogus) in capsys.readouterr().err
