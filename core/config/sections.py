"""Sections of ``settings.yaml`` kept beside ``settings.py`` (which stays small):
``tools`` (tool stacking, ADR 0027), ``metrics`` (ADR 0028), ``state``
(extension state, ADR 0022) and ``dev`` (hot reload, ADR 0032); ``storage``
(ADR 0034) lives in ``core.config.storage`` and is re-exported here; ``kernel``
and ``scheduling`` are in ``core.config.scale``; ``workflows`` (ADR 0091) is here.

``Settings`` (``core.config.settings``) holds them as ``tools``, ``metrics``, ``state``, ``dev``
and (through ``ScaleOutSections``) ``storage``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.config.storage import StorageSettings  # its home; here for older imports

__all__ = [
    "DevSettings",
    "MetricsSettings",
    "StateSettings",
    "StorageSettings",
    "ToolOverride",
    "ToolsSettings",
    "WorkflowsSettings",
    "listen_address",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolOverride(_Section):
    """One ``tools.overrides`` entry (ADR 0027): take a tool away, take one
    provider's version away, or give one provider another priority for it.

    ``{disabled: true}``: nobody provides the tool. ``{provider: ID, disabled:
    true}``: that extension's version leaves the stack (the next one takes
    over). ``{provider: ID, priority: N}``: that extension's priority for this
    tool is N (0-100) instead of its manifest's, and — the user having said so —
    it may go above the established provider.
    """

    disabled: bool = False
    provider: str | None = Field(default=None, min_length=1)
    priority: int | None = Field(default=None, ge=0, le=100)

    @model_validator(mode="after")
    def _one_meaning(self) -> ToolOverride:
        if self.priority is not None and self.provider is None:
            raise ValueError("priority needs provider: the extension whose priority changes")
        if self.priority is not None and self.disabled:
            raise ValueError("give either disabled: true or a priority, not both")
        if self.provider is not None and self.priority is None and not self.disabled:
            raise ValueError(f"provider {self.provider!r} needs a priority or disabled: true")
        if self.provider is None and not self.disabled:
            raise ValueError("needs disabled: true, or provider with priority or disabled")
        return self


class ToolsSettings(_Section):
    """Who provides a tool that several extensions offer (ADR 0027), and which tools a
    model whose schemas come on demand is always sent (``resident``: tool or group
    names, ADR 0097)."""

    overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    resident: list[str] = Field(default_factory=lambda: ["current_time"])


class MetricsSettings(_Section):
    """Prometheus metrics (ADR 0028): ``/metrics`` over HTTP and a snapshot file."""

    listen: str | None = None  # "127.0.0.1:9464" serves /metrics there; null: no server
    snapshot_interval_s: float = Field(default=15.0, gt=0)  # <data>/metrics.prom, and at stop

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            listen_address(value)
        return value


def listen_address(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9464`` for IPv6) as ``(host, port)``; ``ValueError`` if not."""
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{value!r} is not host:port (e.g. 127.0.0.1:9464)")
    return host, int(port)


class StateSettings(_Section):
    """Extension state through the context (SPEC §9, ADR 0022): one kernel store."""

    ttl_s: float = Field(default=3600.0, gt=0)  # per key, refreshed when the extension reads it
    max_bytes_per_extension: int = Field(default=10 * 1024 * 1024, ge=1024)  # then LRU eviction
    max_bytes_per_session: int = Field(default=1024 * 1024, ge=1024)  # then writes are refused


class DevSettings(_Section):
    """For extension authors (ADR 0032): reload an extension when its files change."""

    watch: bool = False  # watch every extension directory; off by default
    watch_debounce_ms: int = Field(default=400, ge=10)  # quiet time before a reload
    reload_drain_s: float = Field(default=30.0, gt=0)  # in-flight calls get this long


class WorkflowsSettings(_Section):
    """Workflows (ADR 0091): how often the leader looks for due runs (a run started
    in this process starts at once), how often a failing step is tried before its run
    fails, the first retry's delay (doubling), and how long finished runs are kept."""

    poll_s: float = Field(default=2.0, gt=0.0, le=60.0)
    step_retries: int = Field(default=2, ge=0, le=10)
    retry_delay_s: float = Field(default=5.0, ge=0.0, le=3600.0)
    keep_days: int = Field(default=30, ge=1, le=3650)
    ask_timeout_s: float = Field(default=86400.0, gt=0.0)
