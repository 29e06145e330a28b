"""Where an in-process extension's databases go (``context.storage``, ADR 0035).

It builds the contract's ``StoreLocation`` from the settings, so it lives on
the extensions' side: ``core.runtime`` below knows only the data directory's
layout (ADR 0081).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.extensions.contract.data import StoreLocation
from core.runtime.datadir import extension_data_dir

if TYPE_CHECKING:
    from core.config.storage import StorageSettings

__all__ = ["extension_storage"]


def extension_storage(data_root: Path, storage: StorageSettings, ext_id: str) -> StoreLocation:
    """Where an in-process extension's databases go (``context.storage``, ADR 0035): its
    data dir under ``data_root`` (created), or the kernel's PostgreSQL with
    ``storage.backend: postgres``."""
    data_dir = extension_data_dir(data_root, ext_id)
    data_dir.mkdir(parents=True, exist_ok=True)
    if storage.backend == "postgres":
        return StoreLocation(data_dir, "postgres", storage.postgres_dsn, ext_id)
    return StoreLocation(data_dir, extension_id=ext_id)
