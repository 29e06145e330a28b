"""PostgreSQL for tests: a fresh database per test, or one clear skip line.

The server is ``HEARTH_TEST_POSTGRES_DSN`` when set, else the local one on
127.0.0.1:5432 (database ``test``, user ``root`` then ``postgres``). Each test
that asks for ``postgres_dsn`` gets the DSN of a new, empty database with a
random name, dropped afterwards. Where no server answers, the test is skipped
with the reason — nothing fails for want of PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ENV_DSN = "HEARTH_TEST_POSTGRES_DSN"
LOCAL_DSNS = (
    "postgresql://root@127.0.0.1:5432/test",
    "postgresql://postgres@127.0.0.1:5432/test",
)

T = TypeVar("T")
_found: list[str | None] = []  # cached for the session: [admin dsn] or [None]
_skip_reason: list[str] = []


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    result: list[Any] = []

    def target() -> None:
        try:
            result.append(asyncio.run(make()))  # type: ignore[arg-type]
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]  # type: ignore[no-any-return]


def with_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at ``database`` instead. Without an ``sslmode`` of its own it
    gets ``disable``: asyncpg's default (``prefer``) first tries TLS on every
    connection, and a connection abandoned in that step logs a stray error."""
    parts = urlsplit(dsn)
    query = (
        parts.query
        if "sslmode=" in parts.query
        else "&".join(q for q in (parts.query, "sslmode=disable") if q)
    )
    return urlunsplit(parts._replace(path=f"/{database}", query=query))


async def _reachable(dsn: str) -> str | None:
    try:
        conn = await asyncpg.connect(dsn, timeout=3)
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


def server_dsn() -> str | None:
    """The DSN of a reachable PostgreSQL server (probed once per session), else ``None``."""
    if not _found:
        candidates = [os.environ[ENV_DSN]] if os.environ.get(ENV_DSN) else list(LOCAL_DSNS)
        errors = []
        for dsn in candidates:
            error = run_sync(lambda dsn=dsn: _reachable(dsn))
            if error is None:
                _found.append(dsn)
                break
            errors.append(f"{dsn} ({error})")
        else:
            _found.append(None)
            _skip_reason.append(
                f"no PostgreSQL reachable (tried {'; '.join(errors)}); "
                f"set {ENV_DSN} to run the PostgreSQL tests"
            )
    return _found[0]


def require_server() -> str:
    """The server DSN, or skip the calling test with one clear line."""
    dsn = server_dsn()
    if dsn is None:
        pytest.skip(_skip_reason[0])
    return dsn


async def _on_server(admin: str, statement: str) -> None:
    """Run one statement on the server's admin database (CREATE/DROP DATABASE)."""
    conn = await asyncpg.connect(admin, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def fresh_database() -> tuple[str, Callable[[], None]]:
    """A new empty database on the test server: (its DSN, a function that drops it)."""
    admin = require_server()
    name = f"hearth_test_{secrets.token_hex(6)}"
    run_sync(lambda: _on_server(admin, f'CREATE DATABASE "{name}"'))
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    return with_database(admin, name), lambda: run_sync(lambda: _on_server(admin, drop))


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """DSN of a fresh PostgreSQL database for this test (dropped after); skips
    the test with one line when no server is reachable."""
    dsn, drop = fresh_database()
    try:
        yield dsn
    finally:
        drop()


@pytest.fixture(params=["sqlite", "postgres"])
def storage_backend(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The ``storage:`` settings section of a kernel test run on both backends:
    SQLite files, or a fresh PostgreSQL database (skipped without a server)."""
    if request.param == "sqlite":
        yield {"backend": "sqlite"}
        return
    dsn, drop = fresh_database()
    try:
        yield {"backend": "postgres", "postgres_dsn": dsn}
    finally:
        drop()
