"""Registering and unregistering extensions across kernel starts (seed 001; ADR 0025).

An extension is registered in a data dir the first time a kernel finds its
directory, and unregistered when a later start no longer does (the user
removed it). Unregistering cleans up what the kernel holds for it — its state
and its event subscriptions in the journal — and says so in the log; its data
directory and the user's grant stay (the user's files and decision). A
directory with a bad manifest is still installed: a typo never wipes state.
"""

from __future__ import annotations

import logging

from core.events import EventBus
from core.extensions.loader import Loader
from core.state import StateStore

__all__ = ["reconcile_registrations"]

log = logging.getLogger("core.kernel.registrations")


async def reconcile_registrations(loader: Loader, state: StateStore, bus: EventBus) -> list[str]:
    """After discovery: record the installed extensions; unregister the ones gone.
    Returns those unregistered. Nothing is unregistered while the extensions
    directory is missing (a wrong ``paths.extensions`` must not forget them all)."""
    if not loader.directory_found:
        return []
    reconciled = await state.reconcile_extensions(loader.records)
    for ext_id in reconciled.registered:
        log.info("extension %s registered (new in this data dir)", ext_id)
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
