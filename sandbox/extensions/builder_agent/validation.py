"""Dry-run a generated extension in a separate process, as the kernel would load it.

The extension is copied to a temporary extensions directory (with the
extensions it depends on, linked read-only by reference) and
``python main.py extensions --json`` runs there with a throw-away settings
file: the kernel's own manifest validator, import and ``initialize()``, and
nothing of the running kernel is touched — a generated extension that hangs
or crashes while loading takes only that process down. Errors come back
verbatim, with the temporary path replaced by the real one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

import core.extensions.contract as contract

# The kernel's command line sits next to the package that holds the contract
# (core/extensions/contract/__init__.py).
HEARTH_MAIN = Path(contract.__file__).resolve().parents[3] / "main.py"
MANIFEST_FILE = "manifest.yaml"


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """Outcome of one dry run of the files whose hash is ``digest``."""

    ok: bool
    summary: str
    digest: str


async def dry_run(
    extensions_dir: Path, ext_id: str, digest: str, timeout_s: float
) -> ValidationResult:
    """Load ``ext_id`` in a subprocess; ``ok`` when the kernel reports it ``active``."""
    if not HEARTH_MAIN.is_file():
        return ValidationResult(False, f"cannot validate: {HEARTH_MAIN} not found", digest)
    with tempfile.TemporaryDirectory(prefix="hearth-builder-") as tmp:
        work = Path(tmp)
        staged = work / "extensions"
        staged.mkdir()
        shutil.copytree(
            extensions_dir / ext_id,
            staged / ext_id,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        for dep in _dependencies(extensions_dir, ext_id):
            (staged / dep).symlink_to(extensions_dir / dep, target_is_directory=True)
        settings = work / "settings.yaml"
        dry = _settings(staged, work / "data", timeout_s)
        settings.write_text(yaml.safe_dump(dry), encoding="utf-8")
        # The dry run's throw-away data dir grants what is staged (the public
        # command line, as the user would): validation tests the code, the
        # user's own grant still decides whether the real kernel loads it.
        # A manifest the grant cannot read is reported by the run below.
        staged_ids = sorted(p.name for p in staged.iterdir())
        main, with_settings = [sys.executable, str(HEARTH_MAIN)], ["--settings", str(settings)]
        code, out, err = await _run(
            [*main, "extensions", "grant", *staged_ids, "--yes", *with_settings],
            cwd=work,
            timeout_s=timeout_s,
        )
        if code is not None:
            code, out, err = await _run(
                [*main, "extensions", "--json", *with_settings],
                cwd=work,
                timeout_s=timeout_s,
            )
        real = str(extensions_dir / ext_id)

        def unstage(text: str) -> str:
            return text.replace(str(staged / ext_id), real).strip()

        if code is None:
            return ValidationResult(
                False,
                f"validation timed out after {timeout_s:g} s: importing or initializing "
                f"{ext_id} does not finish (blocking code at import or in initialize()?)",
                digest,
            )
        return _verdict(ext_id, code, unstage(out), unstage(err), digest)


def _verdict(ext_id: str, code: int, out: str, err: str, digest: str) -> ValidationResult:
    try:
        report = json.loads(out)
    except ValueError:
        tail = "\n".join(err.splitlines()[-20:])
        return ValidationResult(False, f"the dry run failed (exit {code}):\n{tail}", digest)
    entry = next((e for e in report if isinstance(e, dict) and e.get("id") == ext_id), None)
    if entry is None:
        return ValidationResult(
            False,
            f"{ext_id}/{MANIFEST_FILE} was not found, or its id does not name the directory",
            digest,
        )
    if entry.get("status") == "active":
        caps = ", ".join(entry.get("capabilities") or []) or "none"
        tools = ", ".join(entry.get("tools") or []) or "none"
        return ValidationResult(
            True, f"validation passed: {ext_id} loads; capabilities: {caps}; tools: {tools}", digest
        )
    status, error = entry.get("status"), entry.get("error")
    return ValidationResult(False, f"validation failed: {ext_id} is {status}: {error}", digest)


def _dependencies(extensions_dir: Path, ext_id: str) -> list[str]:
    """Existing extensions ``ext_id`` depends on, transitively (best effort)."""
    seen: set[str] = set()
    todo = [ext_id]
    while todo:
        current = todo.pop()
        try:
            raw = yaml.safe_load((extensions_dir / current / MANIFEST_FILE).read_text("utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        deps = raw.get("depends_on") if isinstance(raw, dict) else None
        for dep in deps if isinstance(deps, list) else []:
            dep = str(dep)
            if dep != ext_id and dep not in seen and (extensions_dir / dep).is_dir():
                seen.add(dep)
                todo.append(dep)
    return sorted(seen)


def _settings(extensions: Path, data: Path, timeout_s: float) -> dict[str, object]:
    """The dry run's settings: Hearth's defaults (an extension that is not bundled
    runs in a plugin host, as it will for real: ADR 0086), its deadline the whole
    validation's — a plugin host starting on a busy machine can take longer than
    the loader's 10 s, and a hang is still cut off (``_run``)."""
    return {
        "paths": {"extensions": str(extensions), "data": str(data)},
        "loader": {"lifecycle_timeout_s": timeout_s},
        "models": {"default": None},
        "mcp": {"servers": {}},
        "logging": {"level": "WARNING"},
    }


async def _run(argv: list[str], *, cwd: Path, timeout_s: float) -> tuple[int | None, str, str]:
    """Run ``argv``; ``None`` as the exit code means it was killed at the deadline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEARTH__")}
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, "", ""
    except BaseException:
        process.kill()
        await process.wait()
        raise
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
