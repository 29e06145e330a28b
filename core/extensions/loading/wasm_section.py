"""The manifest's ``wasm:`` section and ``requires_abi`` (ADR 0085).

A WebAssembly extension names its module and may state its budgets; it asks
for the clock or randomness here (both then need the user's grant, and what
it draws is recorded for replay). Defaults are small: a tool answers in a
blink, so a runaway one is cut off quickly.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MODULE_SUFFIXES", "WasmSection"]

MODULE_SUFFIXES = (".wasm", ".wat")


class WasmSection(BaseModel):
    """``wasm: {module: tool.wasm, fuel: …, time_limit_ms: …, memory_mb: …, clock, random}``.

    ``fuel``: WebAssembly instructions one call may run (deterministic);
    ``time_limit_ms``: wall-clock limit of one call; ``memory_mb``: the most
    linear memory the module may grow to; ``clock``/``random``: the
    ``hearth.clock_ms``/``hearth.random_fill`` imports.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    module: str = Field(min_length=1)
    fuel: int = Field(default=200_000_000, ge=10_000, le=100_000_000_000)
    time_limit_ms: int = Field(default=2_000, ge=1, le=600_000)
    memory_mb: int = Field(default=32, ge=1, le=4_096)
    clock: bool = False
    random: bool = False

    @field_validator("module")
    @classmethod
    def _inside_extension(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"{value!r} must be a path inside the extension's directory")
        if path.suffix not in MODULE_SUFFIXES:
            raise ValueError(f"{value!r} must end in .wasm (a module) or .wat (its text)")
        return value
