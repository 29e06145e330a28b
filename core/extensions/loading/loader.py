"""Loader: discover → validate → order → import → instantiate → initialize
→ detect protocols; then start, and shut down in reverse order.

Validation of every manifest happens before any extension code runs (as
pluggy checks every hook before registering). A failure in one extension
marks it ``error`` with a one-line reason and skips its dependents; it never
stops the kernel or the other extensions.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.extensions.access.call_gate import CallGate
from core.extensions.access.grant_store import GrantStore, GrantStoreError
from core.extensions.access.grants import GrantRequest, not_granted_reason
from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.contract import HOST_ABI_VERSION
from core.extensions.loading.capabilities import (
    Capability,
    detect_capabilities,
    require_permissions,
)
from core.extensions.loading.code_digest import CodeFiles, CodeLinkError, read_code
from core.extensions.loading.code_snapshot import CodeSnapshots
from core.extensions.loading.declarations import check_subscriptions, check_tool_declarations
from core.extensions.loading.dependencies import dependents_of, order_by_dependencies
from core.extensions.loading.importer import import_entrypoint
from core.extensions.loading.isolation_choice import ISOLATED, isolation_of
from core.extensions.loading.lifecycle import call_in_thread, call_with_timeout, failure_reason
from core.extensions.loading.manifest import (
    MANIFEST_FILE,
    Manifest,
    ManifestError,
    abi_refusal,
    load_manifest,
)
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
from core.extensions.sdk import missing_group_reason

log = logging.getLogger("core.loader")

# Called with the valid manifests after discovery, before any extension code runs.
DiscoveredHook = Callable[[list[Manifest]], None]
# (manifest, snapshot of its code (ADR 0073), services) -> instance; used for `agent:` manifests
# without an entrypoint and for `isolation: process` and `wasm`.
InstanceFactory = Callable[[Manifest, Path, KernelServices], Any]


class Loader:
    """Owns every extension's record and lifecycle."""

    def __init__(
        self,
        extensions_dir: Path,
        *,
        lifecycle_timeout_s: float = 10.0,
        default_isolation: str = "inprocess",  # the kernel: settings.isolation.default
        agent_factory: InstanceFactory | None = None,
        isolated_factory: InstanceFactory | None = None,
        disabled: Mapping[str, str] | None = None,
        grants: GrantStore | None = None,
        secrets: Mapping[str, str] | None = None,
        records: dict[str, ExtensionRecord] | None = None,
        on_discovered: DiscoveredHook | None = None,
        code_snapshots: Path | None = None,
    ) -> None:
        self.extensions_dir = extensions_dir
        # where the code is imported from: a snapshot of the bytes hashed (ADR 0073);
        # None: a temporary directory (commands that only read the extensions, unit tests)
        self.snapshots = CodeSnapshots(code_snapshots)
        self._read: dict[str, CodeFiles] = {}  # discovered, not yet written: ext id -> files
        self.lifecycle_timeout_s = lifecycle_timeout_s
        self.default_isolation = default_isolation
        self.agent_factory = agent_factory
        self.isolated_factory = isolated_factory
        self.disabled = dict(disabled or {})  # ext id -> why the kernel turned it off
        # None: the caller vouches for every extension (loader unit tests only);
        # the kernel always passes the user's grants.
        self.grants = grants
        # None: required secrets are not checked (loader unit tests only)
        self.secrets = secrets
        # ``records``: a table the caller shares (the isolated factory reads it)
        self.records: dict[str, ExtensionRecord] = {} if records is None else records
        # (action, ext id) -> times: "register" (taken into the registry at
        # discovery), "reject" (bad manifest or id), "unregister" (uninstalled)
        self.registrations: Counter[tuple[str, str]] = Counter()
        self.order: list[str] = []
        self.directory_found = False  # whether the last discover() found extensions_dir
        self.on_discovered = on_discovered
        # what ``load_all`` was handed: a reload builds the new instance with the same
        self.services: KernelServices | None = None

    # ------------------------------------------------------------ queries

    def instance(self, ext_id: str) -> Any | None:
        record = self.records.get(ext_id)
        if record is None or record.status is not ExtensionStatus.ACTIVE:
            return None
        return record.instance

    def active(self, capability: Capability | None = None) -> list[ExtensionRecord]:
        """Active records in load order, optionally only those with ``capability``."""
        records = [self.records[i] for i in self.order if i in self.records]
        return [
            r
            for r in records
            if r.status is ExtensionStatus.ACTIVE
            and (capability is None or capability in r.capabilities)
        ]

    def report(self) -> list[dict[str, Any]]:
        """One ``extensions --json`` object per discovered directory, sorted by id,
        with what it asks (``requested``, plain words) and whether that is granted."""
        out = []
        for ext_id in sorted(self.records):
            record = self.records[ext_id]
            entry = record.report()
            request = self.request_of(record)
            entry["requested"] = [] if request is None else request.describe()
            entry["granted"] = request is not None and self._granted(request)
            out.append(entry)
        return out

    def priority_of(self, ext_id: str) -> int:
        """The manifest ``priority`` (0-100; 50 when it has no readable manifest)."""
        record = self.records.get(ext_id)
        return record.manifest.priority if record is not None and record.manifest else 50

    def rank_of(self, ext_id: str) -> float | None:
        """How established a provider is (``GrantStore.rank``); None: no grant."""
        record = self.records.get(ext_id)
        request = None if record is None else self.request_of(record)
        if self.grants is None or request is None:
            return None
        try:
            return self.grants.rank(request)
        except GrantStoreError:
            return None

    def replaces_of(self, ext_id: str) -> dict[str, str]:
        """The names the user's grant lets it take: ``{name: from extension}``."""
        record = self.records.get(ext_id)
        request = None if record is None else self.request_of(record)
        if self.grants is None or request is None:
            return {}
        try:
            grant = self.grants.grant_for(request)
        except GrantStoreError:
            return {}
        return {} if grant is None else dict(grant.replaces)

    def _granted(self, request: GrantRequest) -> bool:
        if self.grants is None:
            return True
        try:
            return self.grants.is_granted(request)
        except GrantStoreError:
            return False

    def dependency_map(self) -> dict[str, list[str]]:
        return {r.ext_id: list(r.manifest.depends_on) for r in self.records.values() if r.manifest}

    # ------------------------------------------------------------ loading

    def discover(self) -> None:
        """Read and validate every manifest; order the loadable ones."""
        self.records.clear()
        self._read.clear()
        self.directory_found = self.extensions_dir.is_dir()
        if not self.directory_found:
            log.warning("extensions directory %s does not exist", self.extensions_dir)
            self.order = []
            return
        for ext_dir in sorted(p for p in self.extensions_dir.iterdir() if p.is_dir()):
            if not (ext_dir / MANIFEST_FILE).is_file() or ext_dir.name.startswith((".", "_")):
                continue
            record = ExtensionRecord(ext_id=ext_dir.name, ext_dir=ext_dir)
            self.records[record.ext_id] = record
            try:
                code = read_code(ext_dir)  # each file once: the manifest checked is hashed
                record.manifest = load_manifest(ext_dir, code.content(MANIFEST_FILE))
            except (ManifestError, CodeLinkError) as exc:
                record.fail(str(exc))
                continue
            except OSError as exc:
                record.fail(f"{ext_dir}: cannot read its files: {exc}")
                continue
            record.code_digest, self._read[record.ext_id] = code.digest, code
        self._refuse_clashing_ids()
        for record in self.records.values():
            if record.manifest is None or record.status is not ExtensionStatus.ACTIVE:
                self.registrations["reject", record.ext_id] += 1
                continue
            self.registrations["register", record.ext_id] += 1
            if not record.manifest.enabled:
                record.disable()
            elif record.ext_id in self.disabled:
                record.disable(self.disabled[record.ext_id])
            elif (wrong_abi := abi_refusal(record.manifest, HOST_ABI_VERSION)) is not None:
                record.fail(wrong_abi)  # before its grant: granting it would not help
            else:
                self._check_grant(record)
                self._check_subscriptions(record)
                self._check_secrets(record)
        deps = {
            r.ext_id: list(r.manifest.depends_on)
            for r in self.records.values()
            if r.manifest is not None and r.status is ExtensionStatus.ACTIVE
        }
        order, skipped = order_by_dependencies(deps)
        for ext_id, reason in skipped.items():
            self.records[ext_id].skip(reason)
        self.order = order
        self._explain_inactive_dependencies()

    def _pin(self, record: ExtensionRecord) -> bool:
        """Write the snapshot of the bytes discovery hashed, to import it from (ADR
        0073); only for an extension about to load (``extensions grant`` writes none).
        False: it could not be written (the record says why)."""
        code = self._read.pop(record.ext_id)
        try:
            record.code_dir = self.snapshots.pin(code, record.ext_id)
        except OSError as exc:
            record.fail(f"cannot write the snapshot of its code in {self.snapshots.root}: {exc}")
            return False
        return True

    def request_of(self, record: ExtensionRecord) -> GrantRequest | None:
        """What the extension asks under the isolation it would run with, from the
        code found when it was discovered (or last reloaded)."""
        if record.manifest is None:
            return None
        return GrantRequest.from_manifest(
            record.manifest, default_isolation=self.default_isolation, code=record.code_digest
        )

    def _check_grant(self, record: ExtensionRecord) -> None:
        """Skip an extension whose request and code the user (or project) has not
        granted, before any of its code is imported."""
        request = self.request_of(record)
        if request is not None:
            refusal = self._grant_refusal(request)
            if refusal is not None:
                record.skip(refusal)

    def _grant_refusal(self, request: GrantRequest) -> str | None:
        """Why ``request`` (with its code) is not granted; None: it is. A grant made
        before grants bound code is bound to this code first (``adopt_code``)."""
        if self.grants is None:
            return None
        try:
            if request.needs_grant:
                self.grants.adopt_code(request)
            if self.grants.is_granted(request):
                return None
            changed = self.grants.change_since_grant(request)
        except GrantStoreError as exc:
            return f"cannot check its grant: {exc}"
        return not_granted_reason(request, changed=changed)

    def _check_subscriptions(self, record: ExtensionRecord) -> None:
        """``events.subscribes`` gets the checks a subscription from code gets (ADR 0044)."""
        request = self.request_of(record)
        if request is None or record.manifest is None:
            return
        if record.status is not ExtensionStatus.ACTIVE:
            return
        try:
            check_subscriptions(record.manifest, record.ext_dir, request.permissions)
        except ManifestError as exc:
            record.fail(str(exc))

    def _refuse_clashing_ids(self) -> None:
        """Ids are unique ignoring case: they name data directories, and a
        case-insensitive file system would give two extensions one directory.
        Every extension of a clash is refused (none of them is "first")."""
        by_folded: dict[str, list[ExtensionRecord]] = {}
        for record in self.records.values():
            by_folded.setdefault(record.ext_id.lower(), []).append(record)
        for clash in by_folded.values():
            if len(clash) < 2:
                continue
            for record in clash:
                others = ", ".join(repr(r.ext_id) for r in clash if r is not record)
                reason = (
                    f"id {record.ext_id!r} clashes with {others} (ids are unique ignoring case)"
                )
                if record.manifest is not None:
                    record.fail(f"{record.ext_dir / MANIFEST_FILE}: id: {reason}; rename one")

    def _check_secrets(self, record: ExtensionRecord) -> None:
        """Skip an extension whose required secret is not set: it cannot work, and
        that is the user's configuration, not a failure (logged at INFO)."""
        if self.secrets is None or record.manifest is None:
            return
        if record.status is not ExtensionStatus.ACTIVE:
            return
        missing = [n for n in record.manifest.required_secrets if not self.secrets.get(n)]
        if missing:
            record.skip(missing_secrets_reason(missing))
            log.info("extension %s skipped: %s", record.ext_id, record.error)

    def refusal_for(self, manifest: Manifest, ext_dir: Path, code: str) -> str | None:
        """Why ``manifest`` and the code of digest ``code`` (as they are on disk now)
        may not be loaded; None: they may. The checks of ``discover`` for one
        extension (a reload, ADR 0032): changed code needs a new grant (ADR 0044)."""
        if not manifest.enabled:
            return "it is disabled in its manifest (enabled: false)"
        if manifest.id in self.disabled:
            return f"the kernel disabled it: {self.disabled[manifest.id]}"
        wrong_abi = abi_refusal(manifest, HOST_ABI_VERSION)
        if wrong_abi is not None:
            return wrong_abi
        request = GrantRequest.from_manifest(
            manifest, default_isolation=self.default_isolation, code=code
        )
        refusal = self._grant_refusal(request)
        if refusal is not None:
            return refusal
        try:
            check_subscriptions(manifest, ext_dir, request.permissions)
        except ManifestError as exc:
            return str(exc)
        missing = [n for n in manifest.required_secrets if not (self.secrets or {}).get(n)]
        if self.secrets is not None and missing:
            return missing_secrets_reason(missing)
        for dep in manifest.depends_on:
            other = self.records.get(dep)
            if other is None or not other.live:
                state = "missing" if other is None else other.status.value
                return f"dependency {dep!r} is {state if state != 'active' else 'not started'}"
        return None

    def _explain_inactive_dependencies(self) -> None:
        """Name the real cause when a dependency is disabled or has a bad manifest."""
        for record in self.records.values():
            if record.manifest is None or not (record.error or "").startswith("missing"):
                continue
            for dep in record.manifest.depends_on:
                other = self.records.get(dep)
                if other is not None and other.status is not ExtensionStatus.ACTIVE:
                    record.skip(f"dependency {dep!r} is {other.status.value}")
                    break

    async def load_all(self, services: KernelServices) -> None:
        """Discover, then import, instantiate and initialize in dependency order."""
        self.services = services
        self.discover()
        if self.on_discovered is not None:
            self.on_discovered([r.manifest for r in self.records.values() if r.manifest])
        for ext_id in self.order:
            record = self.records[ext_id]
            if record.status is ExtensionStatus.ACTIVE and self._pin(record):
                await self._load_one(record, services)
        self._read.clear()  # the bytes of those that did not load

    async def _load_one(self, record: ExtensionRecord, services: KernelServices) -> None:
        assert record.manifest is not None and record.code_dir is not None
        stage = "import"
        record.calls = gate = CallGate(record.ext_id)
        try:
            record.instance = await self.instantiate(record.manifest, record.code_dir, services)
            stage = "initialize"
            record.context = KernelContext(
                record.manifest, record.ext_dir, services, record.code_dir
            )
            await call_with_timeout(
                record.ext_id,
                record.instance,
                "initialize",
                self.lifecycle_timeout_s,
                record.context,
            )
            record.initialized = True
            stage = "protocol check"
            record.capabilities = detect_capabilities(record.instance)
            stage = "permission check"
            require_permissions(
                record.capabilities,
                record.manifest.permissions,
                str(record.ext_dir / MANIFEST_FILE),
            )
            if Capability.TOOL in record.capabilities:
                stage = "get_tools"
                record.tools = gate.tools(record.instance.get_tools())
            stage = "tool declarations"
            check_tool_declarations(
                record.manifest, record.ext_dir, record.instance, record.capabilities, record.tools
            )
        except Exception as exc:
            missing = missing_group_reason(record.manifest.optional_group, exc)
            if missing is not None:  # the user's install, not a failure: no traceback
                self._mark_failed(record, missing, skip=True)
                log.warning("extension %s skipped: %s", record.ext_id, missing)
                return
            self._mark_failed(record, failure_reason(stage, exc))
            log.error("extension %s: %s", record.ext_id, record.error, exc_info=stage == "import")

    async def instantiate(
        self, manifest: Manifest, code_dir: Path, services: KernelServices
    ) -> Any:
        """The extension's instance, from the snapshot ``code_dir`` of the code its
        grant was checked against (ADR 0073). Importing its module and running its
        constructor are synchronous extension code: they run in a worker thread
        under the lifecycle timeout, so a hanging one cannot freeze the kernel."""
        isolation = isolation_of(manifest, self.default_isolation)
        if isolation in ISOLATED:
            if self.isolated_factory is None:
                raise RuntimeError(f"isolation: {isolation} is not available in this kernel")
            return self.isolated_factory(manifest, code_dir, services)
        if manifest.entrypoint is not None:
            entrypoint = manifest.entrypoint

            def construct() -> Any:
                return import_entrypoint(manifest.id, code_dir, entrypoint)()

            return await call_in_thread(manifest.id, "import", self.lifecycle_timeout_s, construct)
        if self.agent_factory is None:
            raise RuntimeError("declarative agents are not available in this kernel")
        return self.agent_factory(manifest, code_dir, services)

    def _mark_failed(self, record: ExtensionRecord, reason: str, *, skip: bool = False) -> None:
        """``error`` (or ``skipped``) with ``reason``; its dependents not yet started
        are skipped."""
        if skip:
            record.skip(reason)
        else:
            record.fail(reason)
        for dep_id in dependents_of(record.ext_id, self.dependency_map()):
            dependent = self.records[dep_id]
            if dependent.status is ExtensionStatus.ACTIVE and not dependent.started:
                dependent.skip(f"dependency {record.ext_id!r} failed")

    # ------------------------------------------------------------ start / stop

    async def start_all(self) -> None:
        """Call ``start()`` on every active extension in dependency order."""
        for record in self.active():
            await self.start_one(record)

    async def start_one(self, record: ExtensionRecord) -> bool:
        try:
            await call_with_timeout(
                record.ext_id, record.instance, "start", self.lifecycle_timeout_s
            )
        except Exception as exc:
            self._mark_failed(record, failure_reason("start", exc))
            log.error("extension %s: %s", record.ext_id, record.error)
            return False
        record.mark_started(True)
        return True

    async def stop_one(self, record: ExtensionRecord) -> None:
        """``stop()`` a started extension; errors are logged, never raised."""
        if not record.started:
            return
        record.mark_started(False)
        await self._call_quietly(record, "stop")

    async def shutdown(self) -> None:
        """``stop()`` then ``destroy()`` each extension, in reverse dependency order."""
        for ext_id in reversed(self.order):
            record = self.records[ext_id]
            await self.stop_one(record)
        for ext_id in reversed(self.order):
            record = self.records[ext_id]
            if record.initialized:
                record.initialized = False
                await self._call_quietly(record, "destroy")

    async def _call_quietly(self, record: ExtensionRecord, method: str) -> None:
        try:
            await call_with_timeout(
                record.ext_id, record.instance, method, self.lifecycle_timeout_s
            )
        except Exception as exc:
            reason = failure_reason(method, exc)
            record.fail(reason)
            log.error("extension %s: %s", record.ext_id, reason)


def missing_secrets_reason(names: list[str]) -> str:
    """``missing secret TELEGRAM_BOT_TOKEN (set it in the environment or .env)``."""
    plural = "s" if len(names) > 1 else ""
    them = "them" if names[1:] else "it"
    return f"missing secret{plural} {', '.join(names)} (set {them} in the environment or .env)"
