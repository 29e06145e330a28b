"""Per-extension bookkeeping: status, reason, capabilities, tools.

The record is the one place an extension's status changes: ``activate()``,
``fail()``, ``skip()`` and ``disable()`` set status and reason together and
tell the watchers (the kernel's wiring, the service tasks) about every real
transition, so nothing that routes traffic can miss one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.loading.capabilities import Capability
from core.extensions.loading.manifest import Manifest

if TYPE_CHECKING:
    from core.extensions.access.call_gate import CallGate
    from core.extensions.context.kernel_context import KernelContext

log = logging.getLogger("core.loader")


class ExtensionStatus(StrEnum):
    """Statuses reported by ``main.py extensions`` (SPEC §8)."""

    ACTIVE = "active"
    ERROR = "error"
    SKIPPED = "skipped"
    DISABLED = "disabled"


# (record, previous status) -> None; called after the record changed.
StatusWatcher = Callable[["ExtensionRecord", ExtensionStatus], None]


@dataclass
class ExtensionRecord:
    """Everything the kernel knows about one discovered extension directory.

    ``status`` and ``started`` are read freely but changed only through the
    transition methods, which notify the watchers.
    """

    ext_id: str
    ext_dir: Path
    manifest: Manifest | None = None
    status: ExtensionStatus = ExtensionStatus.ACTIVE
    error: str | None = None
    instance: Any = None
    context: KernelContext | None = None
    capabilities: list[Capability] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    calls: CallGate | None = None  # the instance's tool and command calls (ADR 0032)
    code_digest: str = ""  # its files when discovered or reloaded: what a grant binds (ADR 0044)
    code_dir: Path | None = None  # the snapshot of those files it is imported from (ADR 0073)
    initialized: bool = False
    started: bool = False
    watchers: list[StatusWatcher] = field(default_factory=list, repr=False, compare=False)

    # ------------------------------------------------------------ transitions

    def activate(self) -> None:
        """Back to ``active`` with no reason (a successful (re)start)."""
        self._move(ExtensionStatus.ACTIVE, None)

    def fail(self, reason: str) -> None:
        """``error`` with a one-line reason: it gets no traffic until it recovers."""
        self._move(ExtensionStatus.ERROR, reason)

    def skip(self, reason: str) -> None:
        """``skipped``: not loaded because of something else (a dependency)."""
        self._move(ExtensionStatus.SKIPPED, reason)

    def disable(self, reason: str | None = None) -> None:
        """``disabled`` by its manifest or by the kernel (``reason``)."""
        self._move(ExtensionStatus.DISABLED, reason)

    def mark_started(self, started: bool) -> None:
        """Record that ``start()`` succeeded (True) or ``stop()`` was called (False)."""
        if started == self.started:
            return
        self.started = started
        self._notify(self.status)

    def _move(self, status: ExtensionStatus, reason: str | None) -> None:
        previous = self.status
        self.status = status
        self.error = reason
        if previous is not status:
            self._notify(previous)

    def _notify(self, previous: ExtensionStatus) -> None:
        for watcher in list(self.watchers):
            try:
                watcher(self, previous)
            except Exception:
                log.exception("status watcher of %s failed", self.ext_id)

    # ------------------------------------------------------------ queries

    @property
    def live(self) -> bool:
        """Active and started: the only state in which it gets traffic."""
        return self.status is ExtensionStatus.ACTIVE and self.started

    def has(self, capability: Capability) -> bool:
        return self.status is ExtensionStatus.ACTIVE and capability in self.capabilities

    @property
    def tool_names(self) -> list[str]:
        return [str(getattr(t, "name", t)) for t in self.tools]

    def report(self) -> dict[str, Any]:
        """The ``extensions --json`` object of this extension."""
        return {
            "id": self.ext_id,
            "status": self.status.value,
            "capabilities": [str(c) for c in self.capabilities],
            "tools": self.tool_names,
            "error": self.error,
        }
