"""``main.py doctor``: is this installation ready? Exit 1 when something is wrong.

Checks: settings (already valid when we get here), every model provider
(reachable, lists models), every MCP server (connects, lists its tools),
secrets declared by enabled extensions, and the status of every extension.
"""

from __future__ import annotations

import asyncio

from core.agents.mcp_servers import McpServers
from core.agents.model_router import ModelRouter
from core.cli.report import collect_report
from core.extensions.isolation.factory import confinement_report
from core.secrets import load_secrets
from core.settings import Settings

OK, BAD = "ok  ", "FAIL"


def run_doctor(settings: Settings) -> int:
    return asyncio.run(_doctor(settings))


async def _doctor(settings: Settings) -> int:
    problems = 0
    source = settings.settings_file or "defaults (no settings.yaml)"
    print(f"{OK} settings: {source}")
    for level, detail in await confinement_report(settings):
        mark = {"ok": OK, "warn": "WARN"}.get(level, BAD)
        print(f"{mark} isolation: {detail}")
        problems += level == "fail"

    router = ModelRouter(settings.models)
    try:
        print(f"{OK if router.is_configured() else BAD} model: {router.describe('orchestrator')}")
        problems += 0 if router.is_configured() else 1
        for check in await router.check_providers():
            print(f"{OK if check.ok else BAD} provider {check.name}: {check.detail}")
            problems += 0 if check.ok else 1
    finally:
        await router.aclose()

    policy = settings.policy
    print(
        f"{OK} consent: profile {policy.profile}, {len(policy.rules)} rule(s), "
        f"questions time out after {policy.approval_timeout_s:g} s"
    )
    problems += await _check_mcp(settings)
    report = await collect_report(settings)
    secrets = load_secrets()
    from core.extensions.manifest import ManifestError, load_manifest

    for entry in report:
        status = entry["status"]
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
