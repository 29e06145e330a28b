"""Per-extension bookkeeping: status, reason, capabilities, tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.manifest import Manifest

if TYPE_CHECKING:
    from core.extensions.context import KernelContext


class ExtensionStatus(StrEnum):
    """Statuses reported by ``main.py extensions`` (SPEC §8)."""

    ACTIVE = "active"
    ERROR = "error"
    SKIPPED = "skipped"
    DISABLED = "disabled"


@dataclass
class ExtensionRecord:
    """Everything the kernel knows about one discovered extension directory."""

    ext_id: str
    ext_dir: Path
    manifest: Manifest | None = None
    status: ExtensionStatus = ExtensionStatus.ACTIVE
    error: str | None = None
    instance: Any = None
    context: KernelContext | None = None
    capabilities: list[str] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    initialized: bool = False
    started: bool = False

    def fail(self, status: ExtensionStatus, reason: str) -> None:
        self.status = status
        self.error = reason

    def has(self, capability: str) -> bool:
        return self.status is ExtensionStatus.ACTIVE and capability in self.capabilities

    @property
    def tool_names(self) -> list[str]:
        return [str(getattr(t, "name", t)) for t in self.tools]

    def report(self) -> dict[str, Any]:
        """The ``extensions --json`` object of this extension."""
        return {
            "id": self.ext_id,
            "status": self.status.value,
            "capabilities": list(self.capabilities),
            "tools": self.tool_names,
            "error": self.error,
        }
