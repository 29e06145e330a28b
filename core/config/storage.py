"""The ``storage`` section of ``settings.yaml`` (ADR 0034): SQLite or PostgreSQL.

A module of its own, beside ``settings.py`` (which stays small) and free of
the PostgreSQL driver, so reading settings never imports asyncpg.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["StorageSettings"]


class StorageSettings(BaseModel):
    """Where durable state lives (ADR 0034): embedded SQLite files under the data
    directory, or one PostgreSQL database that several kernel processes share."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["sqlite", "postgres"] = "sqlite"
    # libpq URI or key=value string; env HEARTH__STORAGE__POSTGRES_DSN
    postgres_dsn: str | None = None
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    # a process whose heartbeat is older keeps nothing: its in-flight deliveries are taken back
    process_lease_s: float = Field(default=15.0, gt=0)

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StorageSettings:
        if self.backend == "postgres" and not self.postgres_dsn:
            raise ValueError(
                "postgres_dsn: backend is postgres but no DSN is set "
                "(e.g. postgresql://hearth@127.0.0.1:5432/hearth, or HEARTH__STORAGE__POSTGRES_DSN)"
            )
        if self.pool_min_size > self.pool_max_size:
            raise ValueError(
                f"pool_min_size {self.pool_min_size} is above pool_max_size {self.pool_max_size}"
            )
        return self
