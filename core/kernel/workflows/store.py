"""Workflows, their runs and each run's steps, on the kernel's database (ADR 0091).

Three tables of the ``workflows`` component, in ``state.db`` or the kernel's
PostgreSQL (``core.storage``, ADR 0080):

- ``hearth_workflows``: every workflow a person has — their own routines and
  the extensions' (the owner's) — with its trigger's next fire and whether it
  is paused. The id is the name for the owner, ``PERSON/NAME`` for a member.
- ``hearth_workflow_runs``: one row per run, keyed by an id that says why it
  started (``NAME@FIRE`` for a cron fire, ``NAME@evID`` for an event), so a
  trigger seen twice starts one run. The run keeps the definition it started
  with: changing a routine does not change a run under way.
- ``hearth_workflow_steps``: one row per step of a run, written before the step
  acts (``running``, the attempt counted) and after (``done`` with its result):
  after a crash a run goes on from the first step not done, and a done step's
  result is read, never made again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from core.storage import Database, PostgresDatabase, SQLiteDatabase, register_migrations

if TYPE_CHECKING:
    from core.config import StorageSettings

__all__ = [
    "LIVE",
    "WORKFLOWS_COMPONENT",
    "RunRow",
    "RunStatus",
    "StepRow",
    "WorkflowRow",
    "WorkflowStore",
]

WORKFLOWS_COMPONENT = "workflows"
RunStatus = Literal["pending", "running", "waiting", "asking", "succeeded", "failed", "cancelled"]
LIVE = ("pending", "running", "waiting", "asking")

_DDL = """
CREATE TABLE {exists} hearth_workflows (
    id TEXT PRIMARY KEY, person TEXT NOT NULL, name TEXT NOT NULL, source TEXT NOT NULL,
    definition TEXT NOT NULL, channel_id TEXT, user_id TEXT, paused INTEGER NOT NULL DEFAULT 0,
    next_at {real}, created_at {real} NOT NULL
);
CREATE TABLE {exists} hearth_workflow_runs (
    id TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, person TEXT NOT NULL, status TEXT NOT NULL,
    trigger TEXT NOT NULL, input TEXT NOT NULL, definition TEXT NOT NULL, channel_id TEXT,
    user_id TEXT, result TEXT, error TEXT, wake_at {real}, created_at {real} NOT NULL,
    updated_at {real} NOT NULL
);
CREATE INDEX {exists} hearth_workflow_runs_live ON hearth_workflow_runs (status, wake_at);
CREATE INDEX {exists} hearth_workflow_runs_by_workflow
    ON hearth_workflow_runs (workflow_id, created_at);
CREATE TABLE {exists} hearth_workflow_steps (
    run_id TEXT NOT NULL, step_id TEXT NOT NULL, status TEXT NOT NULL, result TEXT,
    error TEXT, attempts INTEGER NOT NULL DEFAULT 0, started_at {real}, finished_at {real},
    PRIMARY KEY (run_id, step_id)
);
"""
register_migrations(
    WORKFLOWS_COMPONENT,
    postgres=[_DDL.format(exists="", real="double precision")],
    sqlite=[_DDL.format(exists="IF NOT EXISTS", real="REAL")],
)
_WF = "id, person, name, source, definition, channel_id, user_id, paused, next_at, created_at"
_RUN = (
    "id, workflow_id, person, status, trigger, input, definition, channel_id, user_id,"
    " result, error, wake_at, created_at, updated_at"
)
_STEP = "run_id, step_id, status, result, error, attempts, started_at, finished_at"


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    """A workflow as kept: ``person`` is ``""`` for the owner; ``source`` is
    ``user`` or the extension's id; ``channel_id``/``user_id`` where its runs speak
    (``None``: the owner's default channel)."""

    id: str
    person: str
    name: str
    source: str
    definition: dict[str, Any]
    channel_id: str | None
    user_id: str | None
    paused: bool
    next_at: float | None
    created_at: float


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run, with the definition it started with."""

    id: str
    workflow_id: str
    person: str
    status: str
    trigger: str
    input: str
    definition: dict[str, Any]
    channel_id: str | None
    user_id: str | None
    result: str | None
    error: str | None
    wake_at: float | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class StepRow:
    """One step of a run as recorded."""

    run_id: str
    step_id: str
    status: str
    result: str | None
    error: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None


class WorkflowStore:
    """The three tables; the database is opened (and migrated) on first use."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    def at(
        cls, db_path: Path, storage: StorageSettings | None = None, *, synchronous: str = "normal"
    ) -> WorkflowStore:
        """PostgreSQL with ``storage.backend: postgres``, else ``db_path`` (``state.db``)."""
        if storage is not None and storage.backend == "postgres":
            return cls(
                PostgresDatabase(
                    storage, [WORKFLOWS_COMPONENT], "the workflows are", synchronous=synchronous
                )
            )
        return cls(
            SQLiteDatabase(db_path, [WORKFLOWS_COMPONENT], synchronous=synchronous, wal=True)
        )

    async def ready(self) -> Database:
        if not self.db.is_open:
            await self.db.open()
        return self.db

    async def aclose(self) -> None:
        if self.db.is_open:
            await self.db.close()

    # ------------------------------------------------------------ workflows

    async def save_workflow(self, row: WorkflowRow, *, replace: bool) -> bool:
        """Keep ``row``; with ``replace`` an existing one of that id is updated (its
        paused flag kept), else ``False`` when the id is taken."""
        db = await self.ready()
        values = (
            row.id,
            row.person,
            row.name,
            row.source,
            json.dumps(row.definition),
            row.channel_id,
            row.user_id,
            int(row.paused),
            row.next_at,
            row.created_at,
        )
        conflict = (
            " ON CONFLICT (id) DO UPDATE SET definition = excluded.definition,"
            " source = excluded.source, next_at = excluded.next_at"
            if replace
            else " ON CONFLICT (id) DO NOTHING"
        )
        changed = await db.execute(
            f"INSERT INTO hearth_workflows ({_WF}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?){conflict}",
            *values,
        )
        return changed > 0

    async def workflow(self, workflow_id: str) -> WorkflowRow | None:
        db = await self.ready()
        row = await db.fetch_one(f"SELECT {_WF} FROM hearth_workflows WHERE id = ?", workflow_id)
        return None if row is None else _workflow(row)

    async def workflows(self, person: str | None = None) -> list[WorkflowRow]:
        """Every workflow (``person``'s only when given), by name."""
        db = await self.ready()
        sql, args = f"SELECT {_WF} FROM hearth_workflows", list[str]()
        if person is not None:
            sql, args = sql + " WHERE person = ?", [person]
        return [_workflow(r) for r in await db.fetch_all(sql + " ORDER BY person, name", *args)]

    async def drop_workflows(self, source: str, keep: set[str]) -> None:
        """Forget ``source``'s workflows not in ``keep`` (an extension no longer
        declares them); their runs stay on record."""
        db = await self.ready()
        for row in await self.workflows():
            if row.source == source and row.id not in keep:
                await db.execute("DELETE FROM hearth_workflows WHERE id = ?", row.id)

    async def delete_workflow(self, workflow_id: str) -> bool:
        db = await self.ready()
        return await db.execute("DELETE FROM hearth_workflows WHERE id = ?", workflow_id) > 0

    async def set_paused(self, workflow_id: str, paused: bool) -> bool:
        db = await self.ready()
        changed = await db.execute(
            "UPDATE hearth_workflows SET paused = ? WHERE id = ?", int(paused), workflow_id
        )
        return changed > 0

    async def due(self, now: float) -> list[WorkflowRow]:
        """Workflows whose timer is due and that are not paused."""
        db = await self.ready()
        rows = await db.fetch_all(
            f"SELECT {_WF} FROM hearth_workflows WHERE paused = 0 AND next_at IS NOT NULL"
            " AND next_at <= ? ORDER BY next_at",
            now,
        )
        return [_workflow(r) for r in rows]

    async def fire(self, workflow: WorkflowRow, run: RunRow, next_at: float | None) -> bool:
        """One timer fire, once: the run is inserted (its id names the fire) and the
        timer moved on, in one transaction; ``False`` when another process fired it."""
        db = await self.ready()
        async with db.transaction() as tx:
            moved = await tx.execute(
                "UPDATE hearth_workflows SET next_at = ? WHERE id = ? AND next_at = ?",
                next_at,
                workflow.id,
                workflow.next_at,
            )
            if moved == 0:
                return False
            await tx.execute(_INSERT_RUN, *_run_values(run))
        return True

    # ------------------------------------------------------------ runs

    async def add_run(self, run: RunRow) -> bool:
        """Insert ``run``; ``False`` when its id is there already (a trigger seen twice)."""
        db = await self.ready()
        return await db.execute(_INSERT_RUN, *_run_values(run)) > 0

    async def run(self, run_id: str) -> RunRow | None:
        db = await self.ready()
        row = await db.fetch_one(f"SELECT {_RUN} FROM hearth_workflow_runs WHERE id = ?", run_id)
        return None if row is None else _run(row)

    async def runs(
        self, *, workflow_id: str | None = None, person: str | None = None, limit: int = 20
    ) -> list[RunRow]:
        """The latest runs, newest first (of one workflow, or one person's)."""
        db = await self.ready()
        sql, args = f"SELECT {_RUN} FROM hearth_workflow_runs WHERE 1 = 1", list[str]()
        for column, value in (("workflow_id", workflow_id), ("person", person)):
            if value is not None:
                sql, args = f"{sql} AND {column} = ?", [*args, value]
        rows = await db.fetch_all(f"{sql} ORDER BY created_at DESC, id LIMIT {int(limit)}", *args)
        return [_run(r) for r in rows]

    async def runnable(self, now: float) -> list[RunRow]:
        """Live runs to drive now: started or asking ones, and waiting ones whose time came."""
        db = await self.ready()
        rows = await db.fetch_all(
            f"SELECT {_RUN} FROM hearth_workflow_runs WHERE status IN ('pending', 'running',"
            " 'asking') OR (status = 'waiting' AND wake_at <= ?) ORDER BY created_at, id",
            now,
        )
        return [_run(r) for r in rows]

    async def set_run(
        self,
        run_id: str,
        status: RunStatus,
        *,
        wake_at: float | None = None,
        result: str | None = None,
        error: str | None = None,
    ) -> bool:
        """Move a live run on; a run already ended (cancelled meanwhile) stays as it is."""
        db = await self.ready()
        changed = await db.execute(
            "UPDATE hearth_workflow_runs SET status = ?, wake_at = ?, result = ?, error = ?,"
            " updated_at = ? WHERE id = ?"
            " AND status IN ('pending', 'running', 'waiting', 'asking')",
            status,
            wake_at,
            result,
            error,
            time.time(),
            run_id,
        )
        return changed > 0

    async def prune(self, before: float) -> int:
        """Finished runs (and their steps) older than ``before`` are forgotten."""
        db = await self.ready()
        async with db.transaction() as tx:
            await tx.execute(
                "DELETE FROM hearth_workflow_steps WHERE run_id IN (SELECT id FROM"
                " hearth_workflow_runs WHERE status NOT IN ('pending', 'running', 'waiting',"
                " 'asking') AND updated_at < ?)",
                before,
            )
            return await tx.execute(
                "DELETE FROM hearth_workflow_runs WHERE status NOT IN ('pending', 'running',"
                " 'waiting', 'asking') AND updated_at < ?",
                before,
            )

    # ------------------------------------------------------------ steps

    async def steps(self, run_id: str) -> dict[str, StepRow]:
        db = await self.ready()
        rows = await db.fetch_all(
            f"SELECT {_STEP} FROM hearth_workflow_steps WHERE run_id = ?", run_id
        )
        return {str(r[1]): _step(r) for r in rows}

    async def step_started(self, run_id: str, step_id: str) -> int:
        """The step is about to act: its attempt counted (returned), before anything."""
        db = await self.ready()
        now = time.time()
        await db.execute(
            f"INSERT INTO hearth_workflow_steps ({_STEP}) VALUES (?, ?, 'running', NULL, NULL,"
            " 1, ?, NULL) ON CONFLICT (run_id, step_id) DO UPDATE SET status = 'running',"
            " attempts = hearth_workflow_steps.attempts + 1, started_at = excluded.started_at",
            run_id,
            step_id,
            now,
        )
        value = await db.fetch_value(
            "SELECT attempts FROM hearth_workflow_steps WHERE run_id = ? AND step_id = ?",
            run_id,
            step_id,
        )
        return int(value)

    async def step_ended(
        self,
        run_id: str,
        step_id: str,
        status: Literal["done", "failed", "skipped", "retry", "waiting"],
        *,
        result: str | None = None,
        error: str | None = None,
    ) -> None:
        db = await self.ready()
        await db.execute(
            f"INSERT INTO hearth_workflow_steps ({_STEP}) VALUES (?, ?, ?, ?, ?, 0, NULL, ?)"
            " ON CONFLICT (run_id, step_id) DO UPDATE SET status = excluded.status,"
            " result = excluded.result, error = excluded.error,"
            " finished_at = excluded.finished_at",
            run_id,
            step_id,
            status,
            result,
            error,
            time.time(),
        )


_INSERT_RUN = (
    f"INSERT INTO hearth_workflow_runs ({_RUN}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (id) DO NOTHING"
)


def _run_values(run: RunRow) -> tuple[Any, ...]:
    return (
        run.id,
        run.workflow_id,
        run.person,
        run.status,
        run.trigger,
        run.input,
        json.dumps(run.definition),
        run.channel_id,
        run.user_id,
        run.result,
        run.error,
        run.wake_at,
        run.created_at,
        run.updated_at,
    )


def _workflow(row: tuple[Any, ...]) -> WorkflowRow:
    return WorkflowRow(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        json.loads(row[4]),
        row[5],
        row[6],
        bool(row[7]),
        None if row[8] is None else float(row[8]),
        float(row[9]),
    )


def _run(row: tuple[Any, ...]) -> RunRow:
    return RunRow(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        str(row[4]),
        str(row[5]),
        json.loads(row[6]),
        row[7],
        row[8],
        row[9],
        row[10],
        None if row[11] is None else float(row[11]),
        float(row[12]),
        float(row[13]),
    )


def _step(row: tuple[Any, ...]) -> StepRow:
    return StepRow(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        row[3],
        row[4],
        int(row[5]),
        None if row[6] is None else float(row[6]),
        None if row[7] is None else float(row[7]),
    )
