"""Durable schedules in ``<data_dir>/schedules.db``, or in the kernel's PostgreSQL
(the library's ``Store``, ADR 0035).

SQLite: one connection (the kernel's storage layer), WAL, ``synchronous=NORMAL``: a committed
change survives a crash of the process. Instants are stored as Unix seconds
(REAL, ``double precision``); ids come from AUTOINCREMENT (a sequence) so a
cancelled id is never reused. Recording a fire is one conditional update on
both backends: of two passes firing the same due time, one advances it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.extensions.sdk import Store

from .model import Action, Schedule, Timing

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schedules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    text        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('once', 'cron', 'interval')),
    spec        TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    next_due    REAL NOT NULL,
    channel_id  TEXT,
    action      TEXT NOT NULL CHECK (action IN ('notify', 'agent')),
    topic       TEXT NOT NULL,
    created_at  REAL NOT NULL,
    last_due    REAL,
    fires       INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL DEFAULT 'active'
                CHECK (status IN ('active', 'done', 'cancelled')),
    user_id     TEXT,
    person      TEXT
);
CREATE INDEX IF NOT EXISTS schedules_by_due ON schedules (status, next_due);
"""
_POSTGRES_V1 = """
CREATE TABLE schedules (
    id          bigserial PRIMARY KEY,
    text        text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('once', 'cron', 'interval')),
    spec        text NOT NULL,
    timezone    text NOT NULL,
    next_due    double precision NOT NULL,
    channel_id  text,
    action      text NOT NULL CHECK (action IN ('notify', 'agent')),
    topic       text NOT NULL,
    created_at  double precision NOT NULL,
    last_due    double precision,
    fires       integer NOT NULL DEFAULT 0,
    status      text NOT NULL DEFAULT 'active'
                CHECK (status IN ('active', 'done', 'cancelled')),
    user_id     text
);
CREATE INDEX schedules_by_due ON schedules (status, next_due);
"""
# people (SPEC §11): a member's reminders are theirs; the owner's keep NULL
_POSTGRES_V2 = "ALTER TABLE schedules ADD COLUMN person text;"
_ADVANCE = (
    "UPDATE schedules SET last_due = ?, fires = fires + 1,"
    " next_due = COALESCE(?, next_due),"
    " status = CASE WHEN ? IS NULL THEN 'done' ELSE status END"
    " WHERE id = ? AND status = 'active' AND ABS(next_due - ?) < 0.000001"
)
_COLUMNS = (
    "id, text, kind, spec, timezone, next_due, channel_id, action, topic,"
    " created_at, last_due, fires, status, user_id, person"
)


class ScheduleStore(Store):
    """CRUD and due-time queries over the ``schedules`` table."""

    SCHEMA = _SCHEMA
    POSTGRES_SCHEMA = (_POSTGRES_V1, _POSTGRES_V2)

    async def open(self) -> None:
        """Connect, apply the schema, and migrate a SQLite store made before reminders
        recorded who set them: it gets a ``user_id`` column; its rows keep NULL
        and fire to the channel's default target. One made before people existed
        gets a ``person`` column; its rows keep NULL: the owner's."""
        await super().open()
        if self.dialect == "postgres":
            return
        columns = {row[1] for row in await self.fetch_all("PRAGMA table_info(schedules)")}
        if "user_id" not in columns:
            await self.execute("ALTER TABLE schedules ADD COLUMN user_id TEXT")
        if "person" not in columns:
            await self.execute("ALTER TABLE schedules ADD COLUMN person TEXT")

    # ------------------------------------------------------------ writes

    async def add(
        self,
        *,
        text: str,
        timing: Timing,
        timezone: str,
        next_due: datetime,
        channel_id: str | None,
        action: Action,
        topic: str,
        created_at: datetime,
        user_id: str | None = None,
        person: str | None = None,
    ) -> Schedule:
        schedule_id = await self.execute_insert(
            "INSERT INTO schedules (text, kind, spec, timezone, next_due, channel_id,"
            " action, topic, created_at, user_id, person)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                text,
                timing.kind,
                timing.spec,
                timezone,
                next_due.timestamp(),
                channel_id,
                action,
                topic,
                created_at.timestamp(),
                user_id,
                person,
            ),
        )
        schedule = await self.get(schedule_id)
        assert schedule is not None
        return schedule

    async def advance(
        self, schedule_id: int, fired_due: datetime, next_due: datetime | None
    ) -> None:
        """Record the fire of ``fired_due``; ``next_due=None`` finishes the schedule."""
        sql = _ADVANCE
        if self.dialect == "postgres":  # an untyped NULL test needs its type there
            sql = sql.replace("WHEN ? IS NULL", "WHEN CAST(? AS integer) IS NULL")
        await self.execute(
            sql,
            (
                fired_due.timestamp(),
                None if next_due is None else next_due.timestamp(),
                None if next_due is None else 1,
                schedule_id,
                fired_due.timestamp(),
            ),
        )

    async def cancel(self, schedule_id: int) -> bool:
        changed = await self.execute(
            "UPDATE schedules SET status = 'cancelled' WHERE id = ? AND status = 'active'",
            (schedule_id,),
        )
        return changed > 0

    async def update(
        self, schedule_id: int, *, text: str, timing: Timing, next_due: datetime
    ) -> bool:
        changed = await self.execute(
            "UPDATE schedules SET text = ?, kind = ?, spec = ?, next_due = ?"
            " WHERE id = ? AND status = 'active'",
            (text, timing.kind, timing.spec, next_due.timestamp(), schedule_id),
        )
        return changed > 0

    # ------------------------------------------------------------ reads

    async def get(self, schedule_id: int) -> Schedule | None:
        rows = await self._select(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))
        return rows[0] if rows else None

    async def active(self) -> list[Schedule]:
        return await self._select(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' ORDER BY next_due, id", ()
        )

    async def due(self, now: datetime) -> list[Schedule]:
        return await self._select(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' AND next_due <= ?"
            " ORDER BY next_due, id",
            (now.timestamp(),),
        )

    async def next_due(self) -> datetime | None:
        row = await self.fetch_one("SELECT MIN(next_due) FROM schedules WHERE status = 'active'")
        return None if row is None else _instant(row[0])

    async def addresses(self, person: str | None) -> list[tuple[str, str]]:
        """Every (channel, address) ``person``'s reminders fired or fire to (``None``:
        the owner's), for what may wait there."""
        whose = "person IS NULL" if person is None else "person = ?"
        rows = await self.fetch_all(
            "SELECT DISTINCT channel_id, user_id FROM schedules"
            f" WHERE channel_id IS NOT NULL AND user_id IS NOT NULL AND {whose}"
            " ORDER BY channel_id, user_id",
            () if person is None else (person,),
        )
        return [(str(channel), str(user)) for channel, user in rows]

    async def _select(self, sql: str, args: tuple[Any, ...]) -> list[Schedule]:
        return [_schedule(row) for row in await self.fetch_all(sql, args)]


def _instant(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _schedule(row: tuple[Any, ...]) -> Schedule:
    *head, user_id, person = row
    sid, text, kind, spec, tz, next_due, channel, action, topic, created, last, fires, status = head
    return Schedule(
        id=int(sid),
        text=text,
        kind=kind,
        spec=spec,
        timezone=tz,
        next_due=datetime.fromtimestamp(next_due, UTC),
        channel_id=channel,
        action=action,
        topic=topic,
        created_at=datetime.fromtimestamp(created, UTC),
        last_due=_instant(last),
        fires=int(fires),
        status=status,
        user_id=user_id,
        person=person,
    )
