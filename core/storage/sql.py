"""SQL text that reads the same on SQLite and PostgreSQL, and where it cannot (ADR 0051).

Stores write ``?`` placeholders; ``numbered`` turns them into PostgreSQL's
``$1``, ``$2`` … ``upsert`` spells the ``ON CONFLICT`` form both databases
accept. ``for_update`` is the row lock a PostgreSQL transaction needs before
it reads what it is about to change (SQLite's ``BEGIN IMMEDIATE`` already
holds the whole file). ``insertion_order`` is the column that orders a
table's rows as inserted: SQLite's ``rowid``, a PostgreSQL table's serial.
``byte_order`` sorts text by its bytes, as SQLite always does.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Literal

__all__ = ["byte_order", "for_update", "insertion_order", "numbered", "statements", "upsert"]

_QUOTED_OR_MARK = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?")


def numbered(sql: str) -> str:
    """``sql`` with each ``?`` placeholder (outside quotes) as ``$1``, ``$2`` …"""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) != "?":
            return match.group(0)
        count += 1
        return f"${count}"

    return _QUOTED_OR_MARK.sub(swap, sql)


def statements(script: str) -> list[str]:
    """The complete statements of an SQLite ``script``, in order (a ``;`` inside a
    string or a trigger body does not end one)."""
    found: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\r\n;"):
                found.append(pending.strip())
            pending = ""
    if pending.strip(" \t\r\n;"):
        raise ValueError(f"incomplete SQL statement at the end of a script: {pending.strip()!r}")
    return found


def upsert(
    table: str, columns: Sequence[str], key: Sequence[str], update: Sequence[str] | None = None
) -> str:
    """``INSERT`` of ``columns`` that, when a row with the same ``key`` exists, sets
    ``update`` (default: every column not in the key) from the new row instead."""
    changed = [c for c in columns if c not in key] if update is None else list(update)
    marks = ", ".join("?" for _ in columns)
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
    conflict = f" ON CONFLICT ({', '.join(key)}) DO "
    if not changed:
        return head + conflict + "NOTHING"
    return head + conflict + "UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in changed)


def for_update(dialect: Literal["sqlite", "postgres"]) -> str:
    """`` FOR UPDATE`` on PostgreSQL (lock the rows read), nothing on SQLite."""
    return " FOR UPDATE" if dialect == "postgres" else ""


def insertion_order(dialect: Literal["sqlite", "postgres"], serial: str) -> str:
    """The column ordering rows as inserted: ``rowid`` on SQLite, ``serial`` (a
    ``bigserial`` column) on PostgreSQL."""
    return "rowid" if dialect == "sqlite" else serial


def byte_order(dialect: Literal["sqlite", "postgres"]) -> str:
    """`` COLLATE "C"`` on PostgreSQL (text sorted by its bytes, whatever the
    database's locale), nothing on SQLite (which sorts so already)."""
    return ' COLLATE "C"' if dialect == "postgres" else ""
