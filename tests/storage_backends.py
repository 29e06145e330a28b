"""Run a store's tests on both backends: ``storage_for`` gives the ``storage``
settings of a param (``sqlite``, or ``postgres`` on a fresh database, skipped
with one line where no server is reachable)."""

from __future__ import annotations

import pytest

from core.settings_sections import StorageSettings

BACKENDS = ("sqlite", "postgres")


def storage_for(request: pytest.FixtureRequest, backend: str) -> StorageSettings:
    """``storage`` settings for ``backend``; ``postgres`` asks for the ``postgres_dsn``
    fixture (a fresh database, dropped after the test)."""
    if backend == "sqlite":
        return StorageSettings()
    dsn = request.getfixturevalue("postgres_dsn")
    return StorageSettings(backend="postgres", postgres_dsn=dsn, pool_min_size=1, pool_max_size=4)
