"""The storage foundation: settings, pools and versioned migrations on PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from core.config import Settings, SettingsError, load_settings
from core.storage import (
    StorageError,
    apply_migrations,
    known_components,
    open_pool,
    pool_for,
    redact_dsn,
    register_migrations,
    release_pool,
    schema_status,
)

COUNTER_V1 = "CREATE TABLE test_counter (id integer PRIMARY KEY, hits integer NOT NULL)"
COUNTER_V2 = "ALTER TABLE test_counter ADD COLUMN note text"


def test_storage_defaults_to_sqlite_and_postgres_needs_a_dsn(tmp_path, monkeypatch):
    assert Settings().storage.backend == "sqlite"
    path = tmp_path / "settings.yaml"
    path.write_text("storage: {backend: postgres}\n")
    with pytest.raises(SettingsError, match="postgres_dsn"):
        load_settings(path)
    monkeypatch.setenv("HEARTH__STORAGE__POSTGRES_DSN", "postgresql://h@db:5432/hearth")
    settings = load_settings(path)
    assert settings.storage.backend == "postgres"
    assert settings.storage.postgres_dsn == "postgresql://h@db:5432/hearth"


def test_dsn_password_never_shown():
    assert redact_dsn("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert "secret" not in redact_dsn("host=h user=u password=secret dbname=db")
    assert redact_dsn("postgresql://u@h/db") == "postgresql://u@h/db"


async def test_unreachable_server_is_a_clear_error():
    with pytest.raises(StorageError, match=r"postgresql://u:\*\*\*@127.0.0.1:1/db"):
        await open_pool("postgresql://u:pw@127.0.0.1:1/db")


async def test_migrations_apply_once_even_when_processes_start_together(postgres_dsn):
    register_migrations("test_counter", [COUNTER_V1])
    pools = [await open_pool(postgres_dsn, min_size=1, max_size=2) for _ in range(4)]
    try:
        results = await asyncio.gather(
            *(apply_migrations(pool, ["test_counter"]) for pool in pools)
        )
        assert results == [{"test_counter": 1}] * 4
        status = {s.component: s for s in await schema_status(pools[0])}
        assert status["test_counter"].applied == 1 and status["test_counter"].current
    finally:
        for pool in pools:
            await pool.close()


async def test_a_new_migration_is_applied_on_the_next_start(postgres_dsn):
    pool = await open_pool(postgres_dsn)
    try:
        first = {"test_upgrade": [COUNTER_V1]}
        assert await apply_migrations(pool, registry=first) == {"test_upgrade": 1}
        second = {"test_upgrade": [COUNTER_V1, COUNTER_V2]}
        assert await apply_migrations(pool, registry=second) == {"test_upgrade": 2}
        await pool.execute("INSERT INTO test_counter VALUES (1, 1, 'second version')")
        # a database migrated by a newer Hearth is refused, not silently used
        with pytest.raises(StorageError, match="version 2.*only up to 1"):
            await apply_migrations(pool, registry=first)
    finally:
        await pool.close()


async def test_a_failing_migration_leaves_the_previous_version(postgres_dsn):
    pool = await open_pool(postgres_dsn)
    try:
        broken = {"test_broken": [COUNTER_V1, "ALTER TABLE nowhere ADD x int"]}
        with pytest.raises(StorageError, match="migration test_broken 2 failed"):
            await apply_migrations(pool, registry=broken)
        status = {s.component: s.applied for s in await schema_status(pool)}
        assert status.get("test_broken", 0) == 0  # one transaction: version 1 rolled back too
        assert await pool.fetchval("SELECT to_regclass('test_counter')") is None
    finally:
        await pool.close()


async def test_stores_of_one_process_share_one_pool(postgres_dsn):
    first = await pool_for(postgres_dsn)
    second = await pool_for(postgres_dsn)
    assert first is second
    await release_pool(first)
    assert not second.is_closing()
    await release_pool(second)
    assert second.is_closing()


def test_registered_components_report_their_expected_version():
    register_migrations("test_known", [COUNTER_V1, COUNTER_V2])
    assert known_components()["test_known"] == 2
    with pytest.raises(ValueError, match="registered twice"):
        register_migrations("test_known", [COUNTER_V1])
