"""``dev.watch: true``: reload an extension when a file in its directory changes
(ADR 0032). Off by default; meant for someone writing an extension.

``watchfiles`` watches the extensions directory; changes that come closer
together than ``dev.watch_debounce_ms`` are one batch, and each extension
touched in a batch is reloaded once (in load order). Its default filter
skips ``__pycache__``, editor swap files and the like. A failed reload is
logged as an error and the old version keeps running, as for ``/reload``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from watchfiles import awatch

__all__ = ["changed_extensions", "watch_extensions"]

log = logging.getLogger("core.kernel.reload.reloader")


def changed_extensions(root: Path, paths: Iterable[str], known: Iterable[str]) -> list[str]:
    """The ids in ``known`` (load order kept) with a changed file under ``root/<id>/``."""
    touched: set[str] = set()
    for raw in paths:
        try:
            relative = Path(raw).relative_to(root)  # watchfiles reports absolute paths
        except ValueError:
            continue
        if len(relative.parts) >= 2:  # a file inside an extension's directory
            touched.add(relative.parts[0])
    return [ext_id for ext_id in known if ext_id in touched]


async def watch_extensions(
    root: Path,
    known: Callable[[], list[str]],
    reload: Callable[[str], Awaitable[tuple[bool, str]]],
    *,
    debounce_ms: int,
) -> None:
    """Run until cancelled: reload each extension whose files change."""
    root = await asyncio.to_thread(root.resolve)
    if not await asyncio.to_thread(root.is_dir):
        log.warning("dev.watch: the extensions directory %s does not exist; not watching", root)
        return
    log.info("dev.watch: reloading extensions under %s when their files change", root)
    async for changes in awatch(root, debounce=debounce_ms, step=min(50, debounce_ms)):
        for ext_id in changed_extensions(root, (path for _, path in changes), known()):
            reloaded, text = await reload(ext_id)
            if reloaded:
                log.info("dev.watch: %s", text)
            else:
                log.error("dev.watch: %s", text)
