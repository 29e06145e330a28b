"""Which processes are alive, and taking back what dead ones held (ADR 0034).

Every process with an open PostgreSQL journal keeps a row in
``journal_processes`` and refreshes its heartbeat every ``lease_s / 3``
seconds (the database's clock, so hosts need not agree on the time). A
process is dead when its heartbeat is older than ``lease_s``, or at once when
it ran on this very host (same host name, boot and PID namespace) and its
PID no longer exists — so a kernel restarted after SIGKILL recovers its work
immediately while a process on another host keeps its in-flight deliveries
for as long as it keeps beating. The deliveries a dead process held in
flight go back to pending marked ``recovered`` (run alone, blamed precisely),
or to ``dead`` once their subscriber's attempts are used up — the same rule
the SQLite journal applies at start.
"""

from __future__ import annotations

import os
import socket
from functools import cache
from typing import Any

from core.events.journal import PROCESS_DIED
from core.events.pg_batch import notify_payload
from core.events.pg_schema import NOTIFY_CHANNEL, REAP_LOCK

__all__ = ["host_key", "leave", "liveness_round"]

_NOW = "extract(epoch from clock_timestamp())"


@cache
def host_key() -> str:
    """This host and PID namespace: two processes with the same key see each other's PIDs."""
    parts = [socket.gethostname()]
    for path in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(path) if path.endswith("/pid") else _read(path))
        except OSError:
            parts.append("?")
    return "|".join(parts)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as file:
        return file.read().strip()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


async def liveness_round(conn: Any, me: str, lease_s: float) -> int:
    """Beat for ``me``, declare dead processes dead, take their deliveries back.

    Returns how many deliveries went back to pending; when any did, the other
    processes are notified (topics unknown: every subscriber looks).
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", REAP_LOCK)
        await conn.execute(
            "INSERT INTO journal_processes (id, host, pid, started_at, heartbeat_at)"
            f" VALUES ($1, $2, $3, {_NOW}, {_NOW})"
            f" ON CONFLICT (id) DO UPDATE SET heartbeat_at = {_NOW}",
            me,
            host_key(),
            os.getpid(),
        )
        neighbours = await conn.fetch(
            "SELECT id, pid FROM journal_processes WHERE host = $1 AND id <> $2", host_key(), me
        )
        gone = [str(r["id"]) for r in neighbours if not _pid_alive(int(r["pid"]))]
        await conn.execute(
            f"DELETE FROM journal_processes WHERE id = ANY($1) OR heartbeat_at < {_NOW} - $2",
            gone,
            lease_s,
        )
        orphaned = (
            "d.status = 'inflight' AND NOT EXISTS"
            " (SELECT 1 FROM journal_processes p WHERE p.id = d.owner)"
        )
        await conn.execute(
            "UPDATE journal_deliveries d SET status = 'dead', error = $1, owner = NULL,"
            f" updated_at = {_NOW} FROM journal_subscribers s"
            f" WHERE s.id = d.subscriber_id AND d.attempt >= s.max_attempts AND {orphaned}",
            PROCESS_DIED,
        )
        recovered = await conn.fetchval(
            "WITH back AS (UPDATE journal_deliveries d SET status = 'pending', recovered = true,"
            f" next_at = 0, error = $1, owner = NULL, updated_at = {_NOW}"
            f" WHERE {orphaned} RETURNING 1) SELECT count(*) FROM back",
            PROCESS_DIED,
        )
        if recovered:
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, notify_payload(me, None))
    return int(recovered)


async def leave(conn: Any, me: str) -> None:
    """A clean close: this process holds nothing any more, forget it."""
    await conn.execute("DELETE FROM journal_processes WHERE id = $1", me)
