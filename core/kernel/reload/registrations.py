"""What the kernel does with the extensions it discovers (seed 001; ADR 0025):
before their code runs, and registering and unregistering them across starts.

An extension is registered in a data dir the first time a kernel finds its
directory, and unregistered when a later start no longer does (the user
removed it). Nodes sharing PostgreSQL share the registrations: there an
extension is unregistered only when no node has it installed (ADR 0039).
Unregistering cleans up what the kernel holds for it — its state and its
event subscriptions in the journal — and says so in the log; its data
directory and the user's grant stay (the user's files and decision). A
directory with a bad manifest is still installed: a typo never wipes state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from core.config import Settings
from core.events import EventBus
from core.extensions.loading.loader import Loader
from core.extensions.loading.manifest import Manifest
from core.runtime import REDACTOR, migrate_extension_data
from core.state import StateStore
from core.state.table import NodeRoster
from core.storage import dsn_passwords

__all__ = ["before_extension_code", "reconcile_registrations"]

log = logging.getLogger("core.kernel.reload.registrations")


def before_extension_code(
    manifests: list[Manifest], settings: Settings, secrets: Mapping[str, str]
) -> None:
    """After manifests are validated, before any extension is imported: values of
    declared secrets, model API keys and the storage password never reach a log line
    (filled before ``initialize``, which may already log them), and old data dirs
    are moved."""
    for manifest in manifests:
        REDACTOR.add(secrets.get(name, "") for name in manifest.secret_names)
    for provider in settings.models.providers.values():
        REDACTOR.add([provider.api_key or "", secrets.get(provider.api_key_env or "", "")])
    REDACTOR.add(dsn_passwords(settings.storage.postgres_dsn or ""))
    migrate_extension_data(settings.data_dir, [m.id for m in manifests])


async def reconcile_registrations(
    loader: Loader, state: StateStore, bus: EventBus, roster: NodeRoster | None = None
) -> list[str]:
    """After discovery: record the installed extensions; unregister the ones gone.
    Returns those unregistered. Nothing is unregistered while the extensions
    directory is missing (a wrong ``paths.extensions`` must not forget them all).
    With several nodes (``roster``), nor while another node has it installed."""
    if not loader.directory_found:
        return []
    reconciled = await state.reconcile_extensions(loader.records, roster)
    for ext_id in reconciled.registered:
        log.info("extension %s registered (new in this data dir)", ext_id)
    for ext_id in reconciled.elsewhere:
        log.warning(
            "extension %s is not installed on this node but is on another: kept registered "
            "(its state and subscriptions stay); it is unregistered once no node has it",
            ext_id,
        )
    for ext_id, keys in reconciled.unregistered.items():
        subscriptions = await bus.forget_subscribers(f"{ext_id}/")
        loader.registrations["unregister", ext_id] += 1
        log.info(
            "extension %s is no longer installed: unregistered; forgot its state (%d keys) "
            "and %d event subscriptions",
            ext_id,
            keys,
            len(subscriptions),
        )
    return list(reconciled.unregistered)
