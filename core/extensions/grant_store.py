"""Where grants live: the user's ``<data>/grants.json`` and the project's
``sandbox/extensions/bundled_grants.yaml``.

The user's file is a kernel file: written atomically (temp file, fsync,
``os.replace``) and opened without following symlinks, so an extension that
can write somewhere under the data dir cannot point it elsewhere. Extensions
get no API to it: only ``main.py extensions grant`` and the kernel's
``/grant`` command write it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.extensions.grants import GrantRequest
from core.settings import PROJECT_ROOT

GRANTS_FILE = "grants.json"
BUNDLED_GRANTS_FILE = PROJECT_ROOT / "sandbox" / "extensions" / "bundled_grants.yaml"
BUNDLED_RANK = 0.0  # bundled extensions are the most established providers


class GrantStoreError(Exception):
    """The grants file cannot be read or written (names the file)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """One recorded grant: the digest granted, when, what it said, what it replaces."""

    digest: str
    granted_at: float
    described: tuple[str, ...]
    replaces: dict[str, str]  # name -> extension it takes it from


class GrantStore:
    """The user's grants (``<data>/grants.json``) plus the project's bundled ones."""

    def __init__(self, data_dir: Path, bundled_file: Path = BUNDLED_GRANTS_FILE) -> None:
        self.path = data_dir / GRANTS_FILE
        self.bundled = load_bundled_grants(bundled_file)

    # ------------------------------------------------------------ queries

    def grants(self) -> dict[str, Grant]:
        """Every recorded user grant by extension id (empty when there is no file)."""
        raw = self._read()
        out: dict[str, Grant] = {}
        for ext_id, entry in raw.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
                raise GrantStoreError(f"{self.path}: entry {ext_id!r} has no digest")
            try:
                out[ext_id] = Grant(
                    digest=entry["digest"],
                    granted_at=float(entry.get("granted_at", 0.0)),
                    described=tuple(str(x) for x in entry.get("described", [])),
                    replaces={str(k): str(v) for k, v in dict(entry.get("replaces", {})).items()},
                )
            except (TypeError, ValueError) as exc:
                raise GrantStoreError(
                    f"{self.path}: entry {ext_id!r} is malformed ({exc})"
                ) from exc
        return out

    def is_bundled(self, request: GrantRequest) -> bool:
        """Granted by the project: listed in bundled_grants.yaml with this digest."""
        return self.bundled.get(request.ext_id) in request.covering_digests()

    def grant_for(self, request: GrantRequest) -> Grant | None:
        """The user's grant that covers exactly this request, if any."""
        grant = self.grants().get(request.ext_id)
        if grant is None or grant.digest not in request.covering_digests():
            return None
        return grant

    def is_granted(self, request: GrantRequest) -> bool:
        return (
            not request.needs_grant
            or self.is_bundled(request)
            or self.grant_for(request) is not None
        )

    def rank(self, request: GrantRequest) -> float | None:
        """How established a provider is: bundled first (0), then by grant time;
        ``None`` when it holds no grant (an isolated extension asking nothing)."""
        if self.is_bundled(request):
            return BUNDLED_RANK
        grant = self.grant_for(request)
        return None if grant is None else grant.granted_at

    # ------------------------------------------------------------ writing

    def record(self, request: GrantRequest, *, replaces: dict[str, str] | None = None) -> Grant:
        """Grant exactly ``request`` (and the names it may take); returns the grant."""
        raw = self._read()
        grant = Grant(
            digest=request.digest,
            granted_at=time.time(),
            described=tuple(request.describe()),
            replaces=dict(replaces or {}),
        )
        raw[request.ext_id] = {
            "digest": grant.digest,
            "granted_at": grant.granted_at,
            "described": list(grant.described),
            "replaces": grant.replaces,
        }
        self._write(raw)
        return grant

    def _read(self) -> dict[str, Any]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise GrantStoreError(f"{self.path}: cannot open ({exc.strerror})") from exc
        with os.fdopen(fd, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise GrantStoreError(f"{self.path}: not valid JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise GrantStoreError(f"{self.path}: top level must be an object")
        return data

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{GRANTS_FILE}.{os.getpid()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            tmp.unlink(missing_ok=True)
            fd = os.open(tmp, flags, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=2, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            raise GrantStoreError(f"{self.path}: cannot write ({exc.strerror})") from exc


def load_bundled_grants(path: Path) -> dict[str, str]:
    """``{extension id: digest}`` from the project's committed file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise GrantStoreError(f"{path}: cannot read ({exc})") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise GrantStoreError(f"{path}: must map extension ids to digests")
    return {str(k): v for k, v in raw.items()}
