"""The ``replay`` section of ``settings.yaml`` (ADR 0033, docs/replay.md), beside
``settings.py`` as ``consent_settings.py`` is: light, no kernel imports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ReplaySettings"]


class ReplaySettings(BaseModel):
    """Recording turns for ``main.py replay``."""

    model_config = ConfigDict(extra="forbid")

    record: bool = True  # journal model exchanges and tool calls of every turn
