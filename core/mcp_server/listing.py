"""The tools ``main.py mcp`` lists, read from the extensions on disk, so a client
sees them whether or not a kernel runs (ADR 0074).

The extensions are loaded once, apart (``kernel_apart``: a journal of its own,
never the running kernel's events), as ``main.py extensions`` loads them; the
rows are those a running kernel lists (``Kernel.mcp_listing``). A call still
goes to the running kernel, and says so when none runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from typing import Any

from core.config import Settings

__all__ = ["ToolListing"]

log = logging.getLogger("core.mcp_server")


class ToolListing:
    """The listing of the extensions of ``settings``, loaded on first use and kept
    for the life of the front (a client restarts it to see an extension added)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._rows: tuple[dict[str, Any], ...] | None = None
        self._lock = asyncio.Lock()

    async def rows(self) -> tuple[dict[str, Any], ...]:
        """The rows (``Kernel.mcp_listing``); none when the extensions fail to load,
        tried again on the next listing."""
        async with self._lock:
            if self._rows is None:
                try:
                    self._rows = tuple(await self._load())
                except Exception:
                    log.exception("mcp: the extensions could not be loaded to list their tools")
                    return ()
            return self._rows

    async def _load(self) -> list[dict[str, Any]]:
        from core.kernel.runner import kernel_apart  # heavy: only a listing needs it

        # stdout is the MCP stream: whatever an extension prints while it loads goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            async with kernel_apart(self._settings, "mcp") as kernel:
                await kernel.load()
                rows = kernel.mcp_listing()
        log.info("mcp: %d tools listed from the extensions on disk", len(rows))
        return rows
