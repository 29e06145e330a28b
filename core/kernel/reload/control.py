"""The doors to a reload (ADR 0032): ``/reload ID``, ``main.py extensions reload
ID`` through the journal, extensions with ``permissions.control`` (the builder),
and ``dev.watch``.

Every door ends in ``ReloadControl.reload``, which runs the reload as a task of
its own: a door that stops waiting (a command past its deadline, a cancelled
turn) never cancels a reload half-way. The command line publishes
``system.kernel.reload`` into the journal; the running kernel's bus picks it up
(events written by other processes are polled) and answers on
``system.kernel.reload.result`` with the same ``request_id``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from core.config import DevSettings
from core.events import EventBus
from core.events.models import Event
from core.events.system_payloads import KernelReload, KernelReloadResult, read_system_payload
from core.events.topics import SystemTopics
from core.extensions.contract import Command, TurnContext
from core.extensions.loading.loader import Loader
from core.kernel.reload.reloader import ExtensionReloader, ReloadError
from core.kernel.reload.watch import watch_extensions

__all__ = ["RELOAD_SUBSCRIBER", "ReloadControl"]

log = logging.getLogger("core.kernel.reload.reloader")

RELOAD_SUBSCRIBER = "kernel/reload"
USAGE = "Usage: /reload ID — reloads one extension from its files without a restart."


class ReloadControl:
    """Runs reloads for every door; keeps each one alive until it is done."""

    def __init__(
        self, reloader: ExtensionReloader, bus: EventBus, loader: Loader, dev: DevSettings
    ) -> None:
        self._reloader = reloader
        self._bus = bus
        self._loader = loader
        self._dev = dev
        self._tasks: set[asyncio.Task[tuple[bool, str]]] = set()

    async def reload(self, ext_id: str) -> str:
        """The sentence for the user: what was reloaded, or why not."""
        _, text = await self.attempt(ext_id)
        return text

    async def attempt(self, ext_id: str) -> tuple[bool, str]:
        """(reloaded, sentence). The reload itself is shielded from the caller's
        cancellation: it finishes (or rolls back) whatever the caller does."""
        task = asyncio.create_task(self._run(ext_id), name=f"reload:{ext_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    async def _run(self, ext_id: str) -> tuple[bool, str]:
        try:
            report = await self._reloader.reload(ext_id)
        except ReloadError as exc:
            return False, str(exc)
        except Exception as exc:  # a kernel bug: reported, never raised into a door
            log.exception("reload of %s failed unexpectedly", ext_id)
            return False, f"Reload of {ext_id} failed: {type(exc).__name__}: {exc}"
        return True, report.text()

    async def aclose(self) -> None:
        """Kernel stop: let reloads under way finish before extensions shut down."""
        if self._tasks:
            await asyncio.wait(list(self._tasks))

    # ------------------------------------------------------------ doors

    async def watch(self) -> None:
        """``dev.watch``: reload extensions whose files change, until cancelled.
        Off (returns at once) unless set; a watcher that fails is logged, and the
        kernel goes on without it."""
        if not self._dev.watch:
            return
        try:
            await watch_extensions(
                self._loader.extensions_dir,
                self._watched_ids,
                self.attempt,
                debounce_ms=self._dev.watch_debounce_ms,
            )
        except Exception:
            log.exception("dev.watch stopped; extensions are no longer reloaded on change")

    def _watched_ids(self) -> list[str]:
        order = self._loader.order
        return [*order, *(i for i in sorted(self._loader.records) if i not in order)]

    def command(self) -> Command:
        """``/reload ID``: a kernel command, so only the user's messages reach it."""

        async def reload(args: str, turn: TurnContext) -> str:
            words = args.split()
            if len(words) != 1:
                return USAGE
            return await self.reload(words[0])

        return Command("reload", "reload one extension from its files: `/reload ID`", reload)

    def subscribe(self) -> None:
        """Answer ``main.py extensions reload`` (requests journaled by that process)."""
        self._bus.subscribe(SystemTopics.KERNEL_RELOAD, self._on_request, RELOAD_SUBSCRIBER)

    async def _on_request(self, event: Event) -> None:
        request = read_system_payload(KernelReload, event, subscriber=RELOAD_SUBSCRIBER)
        if request is None:
            return
        try:
            expired = float(request.expires_at) < time.time()
        except ValueError:
            expired = True
        if expired:
            log.info("reload of %s asked before this kernel ran: ignored", request.ext_id)
            return
        await self._answer(request, "accepted", f"Reloading {request.ext_id}…")
        reloaded, text = await self.attempt(request.ext_id)
        await self._answer(request, "reloaded" if reloaded else "failed", text)

    async def _answer(self, request: KernelReload, outcome: str, text: str) -> None:
        result = KernelReloadResult(
            request_id=request.request_id, ext_id=request.ext_id, outcome=outcome, text=text
        )
        await self._bus.publish(result.TOPIC, "kernel", result.to_payload())
