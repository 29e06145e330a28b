"""The settings sections of several kernel processes on one PostgreSQL (ADR 0036):
``kernel`` (the role of this process) and ``scheduling`` (the schedule leader's
lease), held with ``storage`` in ``ScaleOutSections``, the base of ``Settings``
that checks the rule tying them: a role other than ``all`` needs PostgreSQL.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.config.storage import StorageSettings

__all__ = ["KernelRole", "KernelSettings", "ScaleOutSections", "SchedulingSettings"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


KernelRole = Literal["all", "channels", "workers"]


class KernelSettings(_Section):
    """What this kernel process runs when several share a PostgreSQL journal (ADR 0036):
    ``channels`` (channel extensions only), ``workers`` (turns, tools, schedules) or
    ``all``. With ``storage.backend: sqlite`` only ``all`` is possible."""

    role: KernelRole = "all"


class SchedulingSettings(_Section):
    """One process fires schedules (ADR 0036): the leader holds a lease this long; a
    dead leader is replaced within it."""

    leader_lease_s: float = Field(default=15.0, ge=1.0, le=3600.0)


class ScaleOutSections(_Section):
    """The sections about where state lives and what this process runs, with the
    rule that ties them: a role other than ``all`` needs PostgreSQL (ADR 0036)."""

    storage: StorageSettings = Field(default_factory=StorageSettings)
    kernel: KernelSettings = Field(default_factory=KernelSettings)
    scheduling: SchedulingSettings = Field(default_factory=SchedulingSettings)

    @model_validator(mode="after")
    def _role_fits_backend(self) -> ScaleOutSections:
        if self.kernel.role != "all" and self.storage.backend != "postgres":
            raise ValueError(
                f"kernel.role: {self.kernel.role!r} needs storage.backend: postgres (it is "
                f"{self.storage.backend!r}); with SQLite one process runs everything (role: all)"
            )
        return self
