"""Hot reload of one extension in a running kernel (ADR 0032).

``ExtensionReloader.reload(ID)`` replaces an extension's instance with one
built from the code and manifest on disk now, without restarting the kernel:

1. read and check the manifest (enabled, granted, secrets, dependencies live)
   and import the new code fresh — the old instance is not touched yet, so a
   syntax error or a failing constructor changes nothing;
2. close the old instance's ``CallGate`` (new tool and command calls are
   refused with a "being reloaded" message) and let the calls in flight finish
   (``dev.reload_drain_s``);
3. stop the old instance (the wiring unwires it) and release its event
   subscriptions (their journal cursors stay);
4. initialize and start the new instance, then put it on the record: the
   wiring wires it — channel, commands, tools, context, hooks, subscriptions,
   service — and the orchestrator is rebuilt for the next turn;
5. destroy the old instance (an isolated one's plugin host exits).

If step 4 fails, the new instance is stopped and destroyed, the old modules
are put back, and the old instance — stopped, never destroyed — is started
again with its subscriptions: it works as before and the error is reported.
The supervisor leaves the extension alone meanwhile. Kept across a reload:
the extension's state (keyed by its id), its grant, and its subscriptions'
journal cursors (events published during the reload are delivered after it).
A grant binds code (ADR 0044): step 1 reads the files on disk once, hashes
them, and code that changed since the grant is refused until the user grants
it again; the new instance is imported from a snapshot of exactly the bytes
hashed (ADR 0073), so a file changed after that is not what runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.events import EventBus
from core.extensions.access.call_gate import CallGate
from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.loading.capabilities import Capability, detect_capabilities
from core.extensions.loading.code_digest import CodeLinkError, read_code
from core.extensions.loading.declarations import check_tool_declarations
from core.extensions.loading.importer import imported_modules, restore_modules
from core.extensions.loading.lifecycle import call_with_timeout, describe_exception, failure_reason
from core.extensions.loading.loader import Loader
from core.extensions.loading.manifest import MANIFEST_FILE, Manifest, ManifestError, load_manifest
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.supervision import ExtensionSupervisor
from core.kernel.wiring import Wiring
from core.runtime.errors import HearthError

__all__ = ["ExtensionReloader", "ReloadError", "ReloadReport"]

log = logging.getLogger("core.kernel.reload.reloader")


class ReloadError(HearthError):
    """A reload that did not happen; ``kept`` says the old instance still serves."""

    def __init__(self, ext_id: str, reason: str, *, kept: bool) -> None:
        after = " The previous version keeps running." if kept else ""
        super().__init__(f"Reload of {ext_id} failed: {reason}.{after}")
        self.ext_id = ext_id
        self.reason = reason
        self.kept = kept


class _BringUpError(HearthError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """A reload that happened: what the new instance offers and how long it took."""

    ext_id: str
    tools: list[str]
    seconds: float
    still_running: int = 0  # calls of the old instance the drain deadline cut off

    def text(self) -> str:
        tools = f" Tools: {', '.join(self.tools)}." if self.tools else ""
        late = (
            f" {self.still_running} call(s) of the old version were still running at the "
            "drain deadline."
            if self.still_running
            else ""
        )
        return f"Reloaded {self.ext_id} in {self.seconds:.1f} s.{tools}{late}"


@dataclass(slots=True)
class _Loaded:
    """One instance as the record holds it."""

    manifest: Manifest | None
    code: str  # code_digest of the files it was built from
    code_dir: Path | None  # the snapshot of those files it was imported from
    instance: Any
    context: KernelContext | None
    capabilities: list[Capability] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)
    calls: CallGate | None = None

    @classmethod
    def of(cls, record: ExtensionRecord) -> _Loaded:
        return cls(
            record.manifest,
            record.code_digest,
            record.code_dir,
            record.instance,
            record.context,
            list(record.capabilities),
            list(record.tools),
            record.calls,
        )

    def put_on(self, record: ExtensionRecord) -> None:
        record.manifest, record.instance = self.manifest, self.instance
        record.context, record.calls = self.context, self.calls
        record.capabilities, record.tools = self.capabilities, self.tools
        record.code_digest, record.code_dir = self.code, self.code_dir


class ExtensionReloader:
    """Replaces one extension's instance at a time (a lock orders concurrent requests)."""

    def __init__(
        self,
        loader: Loader,
        supervision: ExtensionSupervisor,
        wiring: Wiring,
        bus: EventBus,
        *,
        drain_s: float,
    ) -> None:
        self._loader = loader
        self._supervision = supervision
        self._wiring = wiring
        self._bus = bus
        self._drain_s = drain_s
        self._lock = asyncio.Lock()

    async def reload(self, ext_id: str) -> ReloadReport:
        """Reload ``ext_id``; raises ``ReloadError`` saying why it did not happen."""
        async with self._lock:
            started = time.monotonic()
            record = self._loader.records.get(ext_id)
            if record is None:
                known = ", ".join(sorted(self._loader.records)) or "none"
                raise ReloadError(ext_id, f"no such extension (known: {known})", kept=False)
            services = self._loader.services
            if services is None:
                raise ReloadError(ext_id, "extensions are not loaded yet", kept=False)
            manifest, code, code_dir = await self._manifest(record)
            modules = imported_modules(ext_id)
            try:
                instance = await self._loader.instantiate(manifest, code_dir, services)
            except Exception as exc:
                restore_modules(ext_id, modules)
                log.error("reload of %s: import failed", ext_id, exc_info=True)
                raise ReloadError(ext_id, failure_reason("import", exc), kept=record.live) from None
            async with self._supervision.holding(ext_id):
                loaded = _Loaded(manifest, code, code_dir, instance, None)
                still = await self._swap(record, loaded, modules, services)
            report = ReloadReport(ext_id, record.tool_names, time.monotonic() - started, still)
            log.info("%s", report.text())
            return report

    async def _manifest(self, record: ExtensionRecord) -> tuple[Manifest, str, Path]:
        """The manifest, the code digest and the snapshot of the code on disk now (each
        file read once), if they may be loaded."""
        kept = record.live
        try:
            code = await asyncio.to_thread(read_code, record.ext_dir)
            manifest = load_manifest(record.ext_dir, code.content(MANIFEST_FILE))
        except (ManifestError, CodeLinkError) as exc:
            raise ReloadError(record.ext_id, str(exc), kept=kept) from None
        except OSError as exc:
            raise ReloadError(record.ext_id, f"cannot read its files: {exc}", kept=kept) from None
        refusal = self._loader.refusal_for(manifest, record.ext_dir, code.digest)
        if refusal is not None:
            raise ReloadError(record.ext_id, refusal, kept=kept)
        snapshots = self._loader.snapshots
        try:
            code_dir = await asyncio.to_thread(snapshots.pin, code, record.ext_id)
        except OSError as exc:
            reason = f"cannot write the snapshot of its code in {snapshots.root}: {exc}"
            raise ReloadError(record.ext_id, reason, kept=kept) from None
        return manifest, code.digest, code_dir

    async def _swap(
        self,
        record: ExtensionRecord,
        new: _Loaded,
        modules: dict[str, Any],
        services: KernelServices,
    ) -> int:
        """Steps 2-5; returns the old instance's calls still running at the deadline."""
        old = _Loaded.of(record)
        was_started, was_initialized = record.started, record.initialized
        still = 0
        if old.calls is not None:
            old.calls.close()
            still = await old.calls.drain(self._drain_s)
        # events wait in the journal (cursors kept) rather than reach an unwired extension
        if old.context is not None:
            old.context.release_subscriptions()
        self._wiring.release_subscriptions(record.ext_id)
        if record.started:
            record.mark_started(False)  # the wiring unwires it, its service is cancelled
            await self._quietly(record.ext_id, old.instance, "stop")
        try:
            await self._bring_up(record.ext_id, new, services)
        except _BringUpError as exc:
            reason = exc.reason
            log.error("reload of %s failed: %s; putting the old one back", record.ext_id, reason)
            restore_modules(record.ext_id, modules)
            kept = await self._put_back(record, old, was_started, was_initialized)
            raise ReloadError(record.ext_id, reason, kept=kept) from None
        new.put_on(record)
        record.initialized = True
        if record.ext_id not in self._loader.order:
            self._loader.order.append(record.ext_id)  # it was skipped at kernel start
        record.activate()
        record.mark_started(True)  # the wiring wires the new instance
        assert new.context is not None
        new.context.resume_subscriptions()
        if was_initialized:
            await self._quietly(record.ext_id, old.instance, "destroy")
        await self._bus.forget_subscribers(f"{record.ext_id}/")
        return still

    async def _bring_up(self, ext_id: str, new: _Loaded, services: KernelServices) -> None:
        """Initialize and start ``new`` (filling in what the record will hold); on a
        failure whatever it already did is undone and the error carries its stage."""
        assert new.manifest is not None
        timeout = self._loader.lifecycle_timeout_s
        record_dir = self._loader.records[ext_id].ext_dir
        new.context = KernelContext(new.manifest, record_dir, services, new.code_dir)
        new.context.release_subscriptions()  # held until it is wired
        new.calls = CallGate(ext_id)
        stage, initialized = "initialize", False
        try:
            await call_with_timeout(ext_id, new.instance, "initialize", timeout, new.context)
            initialized = True
            stage = "protocol check"
            new.capabilities = detect_capabilities(new.instance)
            if Capability.TOOL in new.capabilities:
                stage = "get_tools"
                new.tools = new.calls.tools(new.instance.get_tools())
            stage = "tool declarations"
            check_tool_declarations(
                new.manifest, record_dir, new.instance, new.capabilities, new.tools
            )
            stage = "start"
            await call_with_timeout(ext_id, new.instance, "start", timeout)
        except Exception as exc:
            if stage == "start":
                await self._quietly(ext_id, new.instance, "stop")
            if initialized:
                await self._quietly(ext_id, new.instance, "destroy")
            raise _BringUpError(failure_reason(stage, exc)) from exc

    async def _put_back(
        self, record: ExtensionRecord, old: _Loaded, was_started: bool, was_initialized: bool
    ) -> bool:
        """The old instance serves again (it was stopped, not destroyed); False if it
        was not serving before or cannot start now (then it is marked ``error``)."""
        old.put_on(record)
        if not (was_started and was_initialized):
            if old.context is not None:
                old.context.resume_subscriptions()
            return False
        record.calls = gate = CallGate(record.ext_id)  # the old gate stays closed
        try:
            if Capability.TOOL in record.capabilities:
                record.tools = gate.tools(record.instance.get_tools())
            await call_with_timeout(
                record.ext_id, record.instance, "start", self._loader.lifecycle_timeout_s
            )
        except Exception as exc:
            record.fail(f"restarting the previous version failed: {describe_exception(exc)}")
            started = False
        else:
            record.mark_started(True)  # wired again
            started = True
        if old.context is not None:
            old.context.resume_subscriptions()
        return started

    async def _quietly(self, ext_id: str, instance: Any, method: str) -> None:
        try:
            await call_with_timeout(ext_id, instance, method, self._loader.lifecycle_timeout_s)
        except Exception as exc:
            log.error("reload of %s: %s", ext_id, failure_reason(method, exc))
