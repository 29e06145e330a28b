"""``main.py doctor``: is this installation ready? Exit 1 when something is wrong.

Checks: settings (already valid when we get here; each key that is not the
default is listed with the file or environment variable that set it), storage (with PostgreSQL:
the connection and each component's schema version), every model provider
(reachable, lists models; one no model setting names is only warned about:
an unused provider is not a failure), every MCP server (connects, lists its tools),
the local model ``main.py setup`` installs (``doctor_local``), secrets
declared by enabled extensions, the status of every extension, and
in-process extensions whose source opens the network without declaring
``permissions.network`` (a warning, ``doctor_network``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from core.agents.mcp_servers import McpServers
from core.agents.model_router import ModelRouter
from core.cli.doctor_local import local_model_lines
from core.cli.doctor_models import model_lines
from core.cli.doctor_network import undeclared_network_lines
from core.cli.report import collect_report
from core.config import Settings, non_defaults
from core.extensions.isolation.kernel.factory import confinement_report
from core.runtime import load_secrets

OK, BAD, WARN, OFF = "ok  ", "FAIL", "WARN", "off "
_MARKS = {"ok": OK, "fail": BAD, "warn": WARN, "off": OFF}


def run_doctor(settings: Settings, *, verbose: bool = False) -> int:
    """``verbose`` adds the layers a tool call crosses, in order (ADR 0079)."""
    return asyncio.run(_doctor(settings, verbose=verbose))


def tool_layer_lines(settings: Settings) -> list[str]:
    """The orchestrator's tool call, outermost layer first, as these settings and the
    installed skills make it (``TOOL_LAYERS``); then the layers that are off."""
    from core.kernel.shaping.tool_pipeline import TOOL_LAYERS, ToolFeatures, layers_on
    from core.kernel.skills import KernelSkills

    ext_root = settings.extensions_dir
    folders = sorted(p for p in ext_root.iterdir() if p.is_dir()) if ext_root.is_dir() else []
    skills = KernelSkills(settings, lambda: [(p.name, p) for p in folders])
    features = ToolFeatures.of(settings, skills=bool(skills.catalog().skills))
    on = layers_on(features)
    stack = " → ".join([*(row.name for row in on), "the tool"])
    lines = [f"tool call layers (outermost first): {stack}"]
    lines += [f"  {row.name}: {row.what}" for row in on]
    lines += [f"  off: {row.name} ({row.what})" for row in TOOL_LAYERS if row not in on]
    return lines


def used_providers(models: Any) -> set[str]:
    """Providers some model setting names (``{provider: NAME, model: ...}`` anywhere in
    ``models`` — the default, an agent's, a fallback — but the providers' own table)."""
    found: set[str] = set()
    if isinstance(models, dict):
        if isinstance(models.get("provider"), str):
            found.add(models["provider"])
        for key, value in models.items():
            if key != "providers":
                found |= used_providers(value)
    elif isinstance(models, list):
        for item in models:
            found |= used_providers(item)
    return found


async def _doctor(settings: Settings, *, verbose: bool = False) -> int:
    problems = 0
    source = settings.settings_file or "defaults (no settings.yaml)"
    local = settings.local_settings_file
    print(f"{OK} settings: {source}" + (f" + {local}" if local.is_file() else ""))
    for key, where in non_defaults(settings):
        print(f"{OK} setting {key}: set in {where}")
    problems += await _check_storage(settings)
    for level, detail in await confinement_report(settings.isolation, settings.loader):
        mark = {"ok": OK, "warn": WARN}.get(level, BAD)
        print(f"{mark} isolation: {detail}")
        problems += level == "fail"

    router = ModelRouter(settings.models)
    try:
        print(f"{OK if router.is_configured() else BAD} model: {router.describe('orchestrator')}")
        problems += 0 if router.is_configured() else 1
        for fine, line in model_lines(settings, router):
            print(f"{OK if fine else BAD} {line}")
            problems += not fine
        used = used_providers(settings.models.model_dump(mode="json"))
        kept = _kept_server(settings)
        for check in await router.check_providers():
            if check.ok:
                print(f"{OK} provider {check.name}: {check.detail}")
            elif check.name in kept:  # its server runs only beside the kernel
                print(f"{WARN} provider {check.name}: {check.detail} (starts with the kernel)")
            elif check.name in used:
                print(f"{BAD} provider {check.name}: {check.detail}")
                problems += 1
            else:
                print(f"{WARN} provider {check.name} (no model uses it): {check.detail}")
    finally:
        await router.aclose()
    for level, line in await local_model_lines(settings.models.local_server):
        print(f"{_MARKS[level]} {line}")
        problems += level == "fail"

    policy = settings.policy
    print(
        f"{OK} consent: profile {policy.profile}, {len(policy.rules)} rule(s), "
        f"questions time out after {policy.approval_timeout_s:g} s"
    )
    if verbose:
        for line in tool_layer_lines(settings):
            print(f"{OK} {line}")
    problems += await _check_mcp(settings)
    report = await collect_report(settings)
    secrets = load_secrets()
    from core.extensions.loading.manifest import ManifestError, load_manifest

    for entry in report:
        status = entry["status"]
        unset = _not_set_up(settings, entry, secrets)
        if unset is not None:  # an optional channel nobody set up: neutral, not a problem
            setup = "`main.py setup` sets it up"
            print(f"{OFF} extension {entry['id']}: not set up ({unset}; {setup})")
            continue
        mark = OK if status in ("active", "disabled") else BAD
        detail = f" — {entry['error']}" if entry["error"] else ""
        print(f"{mark} extension {entry['id']}: {status}{detail}")
        for line in entry.get("status_lines", []):
            print(f"{OK} {entry['id']}: {line}")
        problems += mark == BAD
        if status not in ("active", "skipped"):
            continue
        try:
            manifest = load_manifest(settings.extensions_dir / entry["id"])
        except ManifestError:
            continue
        for spec in manifest.secrets:
            present = bool(secrets.get(spec.name))
            state = "set" if present else "not set"
            fine = present or spec.optional
            optional = " (optional)" if spec.optional else ""
            print(f"{OK if fine else BAD} secret {spec.name} ({entry['id']}): {state}{optional}")
            problems += not fine
    for line in undeclared_network_lines(settings):
        print(f"{WARN} {line}")
    print("doctor: no problems found" if not problems else f"doctor: {problems} problem(s)")
    return 0 if problems == 0 else 1


async def _check_mcp(settings: Settings) -> int:
    """Connect to every configured MCP server once; a failed one is a problem."""
    servers = McpServers(settings.mcp)
    try:
        await servers.connect()
        statuses = servers.statuses()
    finally:
        await servers.cleanup()
    for status in statuses:
        mark = BAD if status.state == "failed" else OK
        print(f"{mark} mcp server {status.line()}")
    return sum(status.state == "failed" for status in statuses)


async def _check_storage(settings: Settings) -> int:
    """PostgreSQL: reachable, and each component's schema at the version this code
    expects (behind is fine: the next start migrates; ahead is a problem)."""
    storage = settings.storage
    if storage.backend == "sqlite":
        print(f"{OK} storage: sqlite files under {settings.data_dir}")
        return 0
    # importing registers their migrations: the journal's and the stores' (ADR 0035)
    import core.events.pg_schema
    import core.kernel.consent.elsewhere
    import core.kernel.conversations.session_schema
    import core.kernel.spending.store
    import core.kernel.workflows.store
    import core.scheduling.state
    import core.state.table  # noqa: F401
    from core.storage import StorageError, open_pool, redact_dsn, schema_status

    where = redact_dsn(storage.postgres_dsn or "")
    try:
        pool = await open_pool(storage.postgres_dsn or "", min_size=1, max_size=1)
    except StorageError as exc:
        print(f"{BAD} storage: {exc}")
        return 1
    try:
        version = await pool.fetchval("SHOW server_version")
        statuses = await schema_status(pool)
    finally:
        await pool.close()
    print(f"{OK} storage: PostgreSQL {version} at {where}")
    problems = 0
    for status in statuses:
        if status.expected == 0:
            continue  # a component this Hearth does not use
        if status.applied > status.expected:
            detail, mark = f"version {status.applied}, newer than this Hearth's", BAD
        elif status.applied < status.expected:
            target = f"version {status.expected} at the next start"
            detail, mark = f"version {status.applied}, migrated to {target}", OK
        else:
            detail, mark = f"version {status.applied} (current)", OK
        print(f"{mark} schema {status.component}: {detail}")
        problems += mark == BAD
    return problems


def _kept_server(settings: Settings) -> set[str]:
    """Providers served by the local model's server, which Hearth starts with the
    kernel (ADR 0098): not answering while the kernel is down is expected."""
    local = settings.models.local_server
    if not local.start:
        return set()
    providers = settings.models.providers.items()
    return {name for name, p in providers if (p.base_url or "").rstrip("/") == local.base_url}


def _not_set_up(settings: Settings, entry: dict[str, Any], secrets: dict[str, str]) -> str | None:
    """What is missing when a channel (it publishes user messages) other than the
    default one was skipped only because none of its required secrets is set (a
    channel the user never set up, issue 48), else ``None``.

    Such an extension is not a failure: the user did not ask for it. One whose
    secrets are partly set, or that failed for another reason, still is."""
    from core.extensions.loading.manifest import ManifestError, load_manifest

    if entry["status"] != "skipped" or "missing secret" not in str(entry.get("error") or ""):
        return None
    try:
        manifest = load_manifest(settings.extensions_dir / entry["id"])
    except ManifestError:
        return None
    if not manifest.permissions.user_messages or settings.channels.default == entry["id"]:
        return None  # not a channel, or the one the user chose to talk through
    required = [spec.name for spec in manifest.secrets if not spec.optional]
    if not required or any(secrets.get(name) for name in required):
        return None
    return ", ".join(required) + (" is" if len(required) == 1 else " are") + " not set"
