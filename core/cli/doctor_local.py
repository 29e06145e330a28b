"""``doctor``'s lines on the local model ``main.py setup`` installs (ADR 0098).

Installed or not, which server build and whether this CPU can run it, whether
the model file still matches the SHA-256 kept in the repository (read in
full: a truncated or replaced file is caught here, not by a confused
server), and whether its server answers ``/health`` and ``/v1/models`` now.
The server runs only while the kernel does, so one that does not answer is a
warning, not a failure. Nobody chose it and nothing is installed: "not set
up", neutral.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import httpx

from core.config import LocalServerSettings
from core.runtime import file_sha256, pinned, server_version_for

__all__ = ["Level", "local_model_lines"]

Level = Literal["ok", "fail", "warn", "off"]
PROBE_TIMEOUT_S = 3.0


async def local_model_lines(local: LocalServerSettings) -> list[tuple[Level, str]]:
    """(level, line) for each fact about the local model."""
    files = local.files
    model = pinned()
    record = files.record()
    if not local.start and record is None:
        return [("off", "local model: not set up (`main.py setup` offers one, offline)")]
    if record is None or not files.server(model).is_file() or not files.model(model).is_file():
        level: Level = "fail" if local.start else "warn"
        return [(level, f"local model: not installed in {files.home} (`main.py setup`)")]
    lines: list[tuple[Level, str]] = []
    version = str(record.get("server_version", "?"))
    runnable = server_version_for(model)
    build = f"{model.server_package} {version}"
    if version == model.server_avx512 and runnable != version:
        lines.append(
            (
                "fail",
                f"local model: server {build} needs AVX-512, which this CPU lacks "
                "(it would die with SIGILL): run `main.py setup` again",
            )
        )
    else:
        lines.append(("ok", f"local model: installed in {files.home}, server {build}"))
    found = await asyncio.to_thread(file_sha256, files.model(model))
    if found == model.model_sha256:
        lines.append(("ok", f"local model: {model.model_name} matches its SHA-256"))
    else:
        lines.append(
            (
                "fail",
                f"local model: {files.model(model)} does not match its SHA-256 "
                f"(expected {model.model_sha256[:16]}…, found {found[:16]}…): run `main.py setup`",
            )
        )
    lines.append(await _server_line(local, model.model_name))
    return lines


async def _server_line(local: LocalServerSettings, name: str) -> tuple[Level, str]:
    starts = "starts it with the kernel" if local.start else "is not started (start: false)"
    root = local.base_url.removesuffix("/v1")
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as client:
            health = await client.get(f"{root}/health")
            models = await client.get(f"{local.base_url}/models")
            listed = models.json().get("data", []) if models.is_success else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return ("warn", f"local model server: not running on {root} now (Hearth {starts})")
    offered = [m.get("id") for m in listed if isinstance(m, dict)]
    if health.is_success and name in offered:
        return ("ok", f"local model server: up on {root}, answers /health and serves {name}")
    state = f"/health {health.status_code}, /v1/models offers {offered or 'nothing'}"
    return ("warn", f"local model server on {root} is not ready ({state})")
