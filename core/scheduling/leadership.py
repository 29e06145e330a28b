"""One schedule leader among kernel processes sharing a PostgreSQL database (ADR 0036).

A lease row in ``hearth_leases`` names the holder and an expiry written with
the server's clock. The holder renews it every ``lease_s / 3``; any other
process takes the row once the expiry has passed, so a dead leader is
replaced within ``scheduling.leader_lease_s`` plus one renew interval. The
holder trusts its lease only until ``lease_s`` after it *sent* the statement
that won or renewed it (its own monotonic clock), which is never later than
the server's expiry: two processes never both believe they lead.

With SQLite there is one process and it always leads (``SOLE_LEADER``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from typing import Protocol

from core.extensions.contract import Leadership
from core.storage import register_migrations

__all__ = [
    "LEASES_COMPONENT",
    "LEASE_DDL",
    "SCHEDULES_LEASE",
    "SOLE_LEADER",
    "LeaseLeader",
    "LeasePool",
]

log = logging.getLogger("core.scheduling.leadership")

SCHEDULES_LEASE = "schedules"
SOLE_LEADER = Leadership(True)

LEASE_DDL = """
CREATE TABLE IF NOT EXISTS hearth_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
"""

LEASES_COMPONENT = "leases"
register_migrations(LEASES_COMPONENT, [LEASE_DDL])

_TAKE = """
INSERT INTO hearth_leases (name, holder, expires_at)
VALUES ($1, $2, now() + make_interval(secs => $3))
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
WHERE hearth_leases.holder = excluded.holder OR hearth_leases.expires_at < now()
RETURNING holder
"""

_GIVE_UP = "DELETE FROM hearth_leases WHERE name = $1 AND holder = $2"


class LeasePool(Protocol):
    """What the lease needs of a connection pool (``asyncpg.Pool`` fits)."""

    async def fetchval(self, query: str, *args: object) -> object: ...
    async def execute(self, query: str, *args: object) -> str: ...


class LeaseLeader:
    """Wins, renews and gives up the lease ``name``; ``leadership()`` says where it stands."""

    def __init__(
        self, pool: LeasePool, node: str, lease_s: float, *, name: str = SCHEDULES_LEASE
    ) -> None:
        if lease_s <= 0:
            raise ValueError(f"scheduling.leader_lease_s must be positive, got {lease_s!r}")
        self.pool = pool
        self.name = name
        self.lease_s = lease_s
        # one holder per process life: a restarted process waits for its old lease to expire
        self.holder = f"{node}:{os.getpid()}:{secrets.token_hex(4)}"
        self.renew_s = lease_s / 3
        self._valid_until = 0.0  # monotonic; leading while now is before it

    def leadership(self) -> Leadership:
        """Leading now, and how soon a scheduler should ask again."""
        return Leadership(time.monotonic() < self._valid_until, self.renew_s)

    @property
    def leading(self) -> bool:
        return self.leadership().leader

    async def try_take(self) -> bool:
        """One attempt to win or renew the lease; whether this process holds it."""
        was = self.leading
        sent = time.monotonic()
        try:
            holder = await self.pool.fetchval(_TAKE, self.name, self.holder, self.lease_s)
        except Exception as exc:  # the database is unreachable: the lease runs out on its own
            log.warning("schedule lease %r: cannot reach the database (%s)", self.name, exc)
            holder = None
        if holder == self.holder:
            self._valid_until = sent + self.lease_s
        elif time.monotonic() >= self._valid_until:
            self._valid_until = 0.0
        now = self.leading
        if now != was:
            log.info("schedule lease %r: %s (%s)", self.name, _word(now), self.holder)
        return now

    async def run(self) -> None:
        """Until cancelled: renew (or try to win) every ``lease_s / 3`` seconds."""
        while True:
            await self.try_take()
            await asyncio.sleep(self.renew_s)

    async def give_up(self) -> None:
        """At a clean stop: free the lease at once so another process need not wait."""
        if not self.leading:
            return
        self._valid_until = 0.0
        try:
            await self.pool.execute(_GIVE_UP, self.name, self.holder)
        except Exception as exc:
            log.warning("schedule lease %r: not released (%s); it expires", self.name, exc)


def _word(leading: bool) -> str:
    return "this process leads" if leading else "this process no longer leads"
