"""A recorded conversation as replay reads it: from the journal or a trace file.

``Trace`` holds one session's turns in order, each with the user's text and
its frames — ``hook.*`` decisions, ``postprocess.*`` results and the
``replay.model`` / ``replay.tool`` records — with every stored payload
resolved. The journal (``<paths.data>/events.db``) and the ledger are read
through read-only SQLite connections of the storage layer
(``sqlite_read_only``), so a running kernel is not disturbed. A
conversation whose records were purged (``events.retention_days``) raises
``PurgedError`` instead of giving a partial trace.

A trace file (``--export``) is JSON lines: a header ``{"hearth_trace": 1,
"session_id"}``, then the journal's events as recorded (``topic``,
``correlation_id``, ``payload``), the blobs they reference included, oldest
first. It replays without the journal (``--trace``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.events.topics import PostProcessTopics, RecordTopics
from core.replay.errors import PurgedError, ReplayError
from core.replay.payloads import BLOB_KEY, MISSING_KEY
from core.storage import sqlite_read_only

__all__ = [
    "Frame",
    "RecordedTurn",
    "SessionSummary",
    "Trace",
    "call_frames",
    "events_with_blobs",
    "frames_of",
    "list_sessions",
    "load_session",
    "read_events",
    "read_trace",
    "resolve",
    "write_trace",
]

TRACE_VERSION = 1
# what a turn's trace holds besides its start: hook frames, post-processing, model and tool records
FRAME_PREFIXES = (
    RecordTopics.HOOK_PREFIX,
    PostProcessTopics.PREFIX,
    RecordTopics.REPLAY_MODEL,
    RecordTopics.REPLAY_TOOL,
)
_COLS = "id, topic, payload, correlation_id, created_at"


@dataclass(frozen=True, slots=True)
class Frame:
    """One journaled event of a turn (payload with its stored values resolved)."""

    topic: str
    payload: dict[str, Any]


@dataclass(slots=True)
class RecordedTurn:
    turn_id: str
    channel_id: str
    user_id: str
    sender_id: str | None
    text: str
    frames: list[Frame] = field(default_factory=list)


@dataclass(slots=True)
class Trace:
    """A conversation's turns; or a workflow run's steps (``run``: its start, ADR 0091)."""

    session_id: str
    turns: list[RecordedTurn]
    raw: list[dict[str, Any]]  # the events as journaled (what ``--export`` writes)
    run: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    turns: int
    first_at: float
    last_at: float
    first_text: str
    unit: str = "turns"  # a workflow run counts steps


def _connect(path: Path) -> closing[sqlite3.Connection]:
    if not path.exists():
        raise ReplayError(f"{path}: no event journal here (is paths.data right?)")
    return sqlite_read_only(path)


def _rows(conn: sqlite3.Connection, sql: str, args: Iterable[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": r[0],
            "topic": r[1],
            "payload": json.loads(r[2]),
            "correlation_id": r[3],
            "created_at": r[4],
        }
        for r in conn.execute(sql, tuple(args))
    ]


def frames_of(journal: Path, turn_ids: list[str]) -> list[dict[str, Any]]:
    """The events of ``turn_ids`` (frames and turn records) and the blobs they use."""
    marks = ",".join("?" * len(turn_ids))
    return events_with_blobs(journal, f"correlation_id IN ({marks})", turn_ids)


def read_events(journal: Path, where: str, args: Iterable[Any]) -> list[dict[str, Any]]:
    """The journal's events matching ``where`` (SQL over ``events``), oldest first."""
    with _connect(journal) as conn:
        return _rows(conn, f"SELECT {_COLS} FROM events WHERE {where} ORDER BY id", args)


def events_with_blobs(journal: Path, where: str, args: Iterable[Any]) -> list[dict[str, Any]]:
    """The frames and replay records matching ``where`` and the blobs they use."""
    with _connect(journal) as conn:
        events = _rows(
            conn,
            f"SELECT {_COLS} FROM events WHERE ({where})"
            " AND (topic LIKE 'hook.%' OR topic LIKE 'postprocess.%' OR topic LIKE 'replay.%')"
            " ORDER BY id",
            args,
        )
        shas = sorted({sha for e in events for sha in _blob_refs(e["payload"])})
        blobs: dict[str, dict[str, Any]] = {}
        for start in range(0, len(shas), 500):
            chunk = shas[start : start + 500]
            found = _rows(
                conn,
                f"SELECT {_COLS} FROM events WHERE topic = ? AND"
                f" json_extract(payload, '$.sha256') IN ({','.join('?' * len(chunk))})",
                [RecordTopics.REPLAY_BLOB, *chunk],
            )
            for blob in found:
                blobs.setdefault(blob["payload"]["sha256"], blob)
    return [*blobs.values(), *events]


def _session_turns(journal: Path, session_id: str) -> list[dict[str, Any]]:
    with _connect(journal) as conn:
        return _rows(
            conn,
            f"SELECT {_COLS} FROM events WHERE topic = ?"
            " AND json_extract(payload, '$.session_id') = ? ORDER BY id",
            [RecordTopics.REPLAY_TURN, session_id],
        )


async def load_session(
    journal: Path, sessions_db: Path, session_id: str, retention_days: float
) -> Trace:
    """The recorded conversation ``session_id``; ``PurgedError`` if its records are gone."""

    def load() -> Trace:
        turns = _session_turns(journal, session_id)
        _check_not_purged(sessions_db, session_id, turns, retention_days)
        raw = frames_of(journal, [t["correlation_id"] for t in turns])
        return build_trace(session_id, raw)

    return await asyncio.to_thread(load)


def _check_not_purged(
    sessions_db: Path, session_id: str, turns: list[dict[str, Any]], retention_days: float
) -> None:
    first_turn = turns[0]["created_at"] if turns else None
    answered: list[float] = []
    if sessions_db.exists():
        with sqlite_read_only(sessions_db) as conn:
            try:
                answered = [
                    r[0]
                    for r in conn.execute(
                        "SELECT created_at FROM hearth_turns WHERE session_id = ?", (session_id,)
                    )
                ]
            except sqlite3.OperationalError:  # no ledger yet
                answered = []
    cutoff = time.time() - retention_days * 86400.0
    older = [t for t in answered if t < cutoff and (first_turn is None or t < first_turn)]
    if older:
        raise PurgedError(
            f"conversation {session_id}: the frames of its turns older than "
            f"events.retention_days ({retention_days:g} days) were purged "
            f"({len(older)} answered messages before the oldest record); "
            "it cannot be replayed, only a whole conversation can"
        )
    if not turns:
        raise ReplayError(
            f"conversation {session_id}: no recorded turns (`main.py replay --list` shows "
            "what can be replayed; replay.record false records nothing)"
        )


def build_trace(session_id: str, raw: list[dict[str, Any]]) -> Trace:
    """Turns and their resolved frames from journal events (blobs first or anywhere).

    A turn's frames are its hook and post-processing frames in journal order,
    then its model and tool records in the order they finished: those a turn's
    ``replay.turn`` / ``replay.calls`` hold (ADR 0052), or, in a recording made
    before, the ``replay.model`` / ``replay.tool`` events journaled one by one."""
    blobs = {
        e["payload"]["sha256"]: e["payload"]["json"]
        for e in raw
        if e["topic"] == RecordTopics.REPLAY_BLOB
    }
    turns: dict[str, RecordedTurn] = {}
    records: dict[str, list[Frame]] = {}
    for event in raw:
        if event["topic"] == RecordTopics.REPLAY_TURN:
            p = resolve(event["payload"], blobs, session_id)
            turns[p["turn_id"]] = RecordedTurn(
                p["turn_id"], p["channel_id"], p["user_id"], p.get("sender_id"), p["text"]
            )
    for event in raw:
        topic, turn_id = event["topic"], event.get("correlation_id")
        if turn_id not in turns:
            continue
        if topic in (RecordTopics.REPLAY_TURN, RecordTopics.REPLAY_CALLS):
            calls = resolve(event["payload"].get("calls", []), blobs, session_id)
            records.setdefault(turn_id, []).extend(call_frames(calls, turn_id, session_id))
        elif topic in (RecordTopics.REPLAY_MODEL, RecordTopics.REPLAY_TOOL):
            frame = Frame(topic, resolve(event["payload"], blobs, session_id))
            records.setdefault(turn_id, []).append(frame)
        elif topic.startswith(FRAME_PREFIXES):
            frame = Frame(topic, resolve(event["payload"], blobs, session_id))
            turns[turn_id].frames.append(frame)
    for turn_id, frames in records.items():
        turns[turn_id].frames.extend(frames)
    if not turns:
        raise ReplayError(f"conversation {session_id}: the trace holds no turn")
    return Trace(session_id, list(turns.values()), raw)


def call_frames(calls: list[dict[str, Any]], turn_id: str, session_id: str) -> list[Frame]:
    """A turn's (or a step's) recorded calls as the frames replay compares and answers from."""
    frames = []
    for call in calls:
        payload = {k: v for k, v in call.items() if k != "topic"}
        frames.append(
            Frame(call["topic"], {"turn_id": turn_id, "session_id": session_id, **payload})
        )
    return frames


def resolve(value: Any, blobs: dict[str, str], session_id: str) -> Any:
    """``value`` with every ``{"$blob": sha}`` replaced by the stored value."""
    if isinstance(value, dict):
        if BLOB_KEY in value and len(value) == 1:
            text = blobs.get(value[BLOB_KEY])
            if text is None:
                raise PurgedError(
                    f"conversation {session_id}: a stored payload ({value[BLOB_KEY][:12]}) "
                    "was purged (events.retention_days); it cannot be replayed"
                )
            return resolve(json.loads(text), blobs, session_id)
        if MISSING_KEY in value:
            raise ReplayError(
                f"conversation {session_id}: a payload of {value.get('chars')} characters "
                "was too large to journal (events.max_payload_bytes); it cannot be replayed"
            )
        return {k: resolve(v, blobs, session_id) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, blobs, session_id) for v in value]
    return value


def _blob_refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if BLOB_KEY in value and len(value) == 1:
            yield value[BLOB_KEY]
        for v in value.values():
            yield from _blob_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _blob_refs(v)


async def list_sessions(journal: Path) -> list[SessionSummary]:
    """Every conversation with recorded turns, most recent first."""

    def read() -> list[SessionSummary]:
        with _connect(journal) as conn:
            rows = _rows(
                conn,
                f"SELECT {_COLS} FROM events WHERE topic = ? ORDER BY id",
                [RecordTopics.REPLAY_TURN],
            )
        by_session: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_session.setdefault(str(row["payload"].get("session_id")), []).append(row)
        summaries = []
        for sid, turns in by_session.items():
            text = turns[0]["payload"].get("text")
            head = text if isinstance(text, str) else "(long message)"
            summaries.append(
                SessionSummary(
                    sid, len(turns), turns[0]["created_at"], turns[-1]["created_at"], head
                )
            )
        return sorted(summaries, key=lambda s: s.last_at, reverse=True)

    return await asyncio.to_thread(read)


def write_trace(trace: Trace, path: Path) -> int:
    """Write ``trace`` as a JSON lines file; returns the number of events written."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"hearth_trace": TRACE_VERSION, "session_id": trace.session_id}))
        out.write("\n")
        for event in trace.raw:
            line = {k: event[k] for k in ("topic", "correlation_id", "payload")}
            if trace.run is not None:  # when: a run's step attempts are told apart by it
                line["created_at"] = event.get("created_at")
            out.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
    return len(trace.raw)


def read_trace(
    path: Path, build: Callable[[str, list[dict[str, Any]]], Trace] = build_trace
) -> Trace:
    """A trace file written by ``write_trace``; ``ReplayError`` naming the line at fault.
    ``build`` makes the trace of its events (``runs.build_any``: a run's too)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ReplayError(f"{path}: cannot read the trace: {exc}") from exc
    events: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ReplayError(f"{path}:{number}: not JSON ({exc})") from exc
        if number == 1:
            header = value if isinstance(value, dict) else {}
            if header.get("hearth_trace") != TRACE_VERSION:
                raise ReplayError(f"{path}:1: not a Hearth trace (hearth_trace: {TRACE_VERSION})")
            continue
        if not isinstance(value, dict) or not {"topic", "payload"} <= value.keys():
            raise ReplayError(f"{path}:{number}: an event needs topic and payload")
        events.append(value)
    return build(str(header.get("session_id")), events)
