"""The parts of the ``models`` section that say what a model may cost and what
serves when it fails (SPEC §11, ADR 0061): a fallback, a price, a budget.

``ModelsSettings`` (``core.config.settings``) holds them as ``models.prices``,
``models.budget``, ``models.cooldown_s`` / ``cooldown_max_s``; each
``{provider, model}`` reference (``models.default``, ``models.agents.*``)
may name its ``fallbacks``.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.runtime import LocalModelFiles, server_argv

__all__ = ["BudgetSettings", "FallbackRef", "LocalServerSettings", "ModelPrice"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FallbackRef(_Section):
    """One model of a fallback chain: tried when the one before it fails (a
    connection error, a timeout, 429 or 5xx, after the provider's own retries)."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)


class ModelPrice(_Section):
    """What a model costs, per million tokens, in the user's currency: ``input``
    (uncached prompt tokens), ``cached_input`` (prompt tokens the server served
    from its cache; ``input``'s price when not given) and ``output``."""

    input: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    output: float = Field(ge=0)

    def cost(self, input_tokens: int, cached_tokens: int, output_tokens: int) -> float:
        """The cost of these tokens (``input_tokens`` includes the cached ones)."""
        cached_price = self.input if self.cached_input is None else self.cached_input
        uncached = max(input_tokens - cached_tokens, 0)
        return (
            uncached * self.input + cached_tokens * cached_price + output_tokens * self.output
        ) / 1_000_000


class BudgetSettings(_Section):
    """What the model may cost a day and a month (``null``: no limit), for the
    whole household (``scope: household``) or for each person alone (``person``).

    At ``notify_at`` of a limit the owner is told once per period; at the limit
    new turns are refused until the period ends or the limit is raised.
    Commands and reminders are never refused. Costs come from ``models.prices``:
    a model with no price costs nothing here.
    """

    daily: float | None = Field(default=None, gt=0)
    monthly: float | None = Field(default=None, gt=0)
    scope: Literal["household", "person"] = "household"
    currency: str = Field(default="USD", min_length=1, max_length=8)
    notify_at: float = Field(default=0.8, gt=0, lt=1)

    @property
    def limited(self) -> bool:
        return self.daily is not None or self.monthly is not None

    @model_validator(mode="after")
    def _month_holds_a_day(self) -> BudgetSettings:
        if self.daily is not None and self.monthly is not None and self.monthly < self.daily:
            raise ValueError(
                f"monthly ({self.monthly:g}) is below daily ({self.daily:g}): "
                "a month could not hold one full day"
            )
        return self


class LocalServerSettings(_Section):
    """The local model ``main.py setup`` installed (ADR 0098): with ``start``, the
    supervisor (and a foreground run) starts its llama.cpp server beside the kernel
    on ``127.0.0.1:port``, restarts it when it dies and stops it with the kernel.
    ``dir``: where it is installed (``null``: ``~/.cache/hearth/local-model``)."""

    start: bool = False
    dir: str | None = None
    port: int = Field(default=8089, ge=1, le=65535)
    threads: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1)
    context: int = Field(default=16384, ge=512)  # tokens the server holds per request
    restart_backoff_max_s: float = Field(default=60.0, gt=0)

    @property
    def files(self) -> LocalModelFiles:
        return LocalModelFiles.at(self.dir)

    @property
    def base_url(self) -> str:
        """Its OpenAI-compatible address, as the provider settings name it."""
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        """The server's command line for these settings."""
        return server_argv(self.files, port=self.port, threads=self.threads, context=self.context)
