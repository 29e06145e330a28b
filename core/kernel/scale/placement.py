"""Where this kernel process stands among several on one PostgreSQL (ADR 0036).

``Placement`` says what the process runs (``kernel.role``) and names it (its
node), and from that the names of the topics and subscribers that bind
deliveries to it: a reply goes to ``system.reply.<node>`` of the node whose
channel received the message, and only that node's ``kernel.reply.<node>``
subscriber sends it. With SQLite there is one process: no node, the single
topic ``system.reply`` and subscriber ``kernel.reply`` as before.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.config import KernelRole, KernelSettings, StorageSettings
from core.events.topics import SystemTopics
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.records import ExtensionRecord

__all__ = ["ROUTER_SUBSCRIBER", "Placement", "apply_role", "node_name", "placement_of"]

log = logging.getLogger("core.kernel.scale.placement")

ROUTER_SUBSCRIBER = "kernel.router"  # the turn side's user.message subscriber, on every node
REPLY_SUBSCRIBER = "kernel.reply"
NOTIFY_SUBSCRIBER = "kernel.notify"


def node_name(data_dir: Path) -> str:
    """``<host>-<8 hex of the data directory>``: the same after a restart, different
    for two processes (each has its own data directory)."""
    digest = hashlib.blake2b(str(data_dir.resolve()).encode(), digest_size=4).hexdigest()
    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname())
    return f"{host or 'host'}-{digest}"


@dataclass(frozen=True, slots=True)
class Placement:
    """The role of this process and its node (``None``: the only process)."""

    role: KernelRole = "all"
    node: str | None = None

    @property
    def shared(self) -> bool:
        """Several processes may share the journal (PostgreSQL)."""
        return self.node is not None

    @property
    def runs_channels(self) -> bool:
        return self.role in ("all", "channels")

    @property
    def runs_workers(self) -> bool:
        return self.role in ("all", "workers")

    def reply_topic(self, origin: str | None) -> str:
        """The topic a reply to a message journaled by node ``origin`` is journaled on."""
        return f"{SystemTopics.REPLY}.{origin}" if self.shared and origin else SystemTopics.REPLY

    @property
    def reply_subscription(self) -> tuple[str, str]:
        """(topic, subscriber id) of the replies this process sends."""
        if self.node is None:
            return SystemTopics.REPLY, REPLY_SUBSCRIBER
        return f"{SystemTopics.REPLY}.{self.node}", f"{REPLY_SUBSCRIBER}.{self.node}"

    @property
    def notify_subscriber(self) -> str:
        """One per channel-running node: each sees every notification, sends its own."""
        return NOTIFY_SUBSCRIBER if self.node is None else f"{NOTIFY_SUBSCRIBER}.{self.node}"


def placement_of(storage: StorageSettings, kernel: KernelSettings, data_dir: Path) -> Placement:
    """The placement the ``storage`` and ``kernel`` settings give this process (its data
    directory names it)."""
    if storage.backend != "postgres":
        return Placement()
    return Placement(kernel.role, node_name(data_dir))


def apply_role(placement: Placement, records: Iterable[ExtensionRecord]) -> list[str]:
    """Disable the loaded extensions this role does not run; their ids.

    ``workers``: channels run in a ``channels`` process. ``channels``: only
    channels, and what they depend on, run here."""
    records = [r for r in records if r.instance is not None and r.manifest is not None]
    if placement.role == "all":
        return []
    channels = {r.ext_id for r in records if Capability.CHANNEL in r.capabilities}
    if placement.role == "workers":
        keep = {r.ext_id for r in records} - channels
    else:
        keep = _with_dependencies(channels, records)
    turned_off = []
    for record in records:
        if record.ext_id not in keep:
            record.disable(f"kernel.role {placement.role}: runs in another process")
            turned_off.append(record.ext_id)
    if turned_off:
        log.info("kernel.role %s: not running %s", placement.role, ", ".join(turned_off))
    return turned_off


def _with_dependencies(ids: set[str], records: list[ExtensionRecord]) -> set[str]:
    depends = {r.ext_id: list(r.manifest.depends_on) for r in records if r.manifest is not None}
    keep, todo = set(ids), list(ids)
    while todo:
        for dep in depends.get(todo.pop(), []):
            if dep not in keep:
                keep.add(dep)
                todo.append(dep)
    return keep
