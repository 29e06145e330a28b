"""Where grants live: the user's ``<data>/grants.json`` and the project's
``sandbox/extensions/bundled_grants.yaml``.

Each grant binds a request digest and a code digest (ADR 0044). A user grant
recorded before grants bound code has no code digest: the first start after
the upgrade binds it to the files present then (``adopt_code``, logged once),
so nobody re-grants everything, and a later change of the code asks again.
The bundled file lists each bundled extension's request and code digests;
``make bundled-grants`` rewrites it (``write_bundled_grants``), and a test
fails while it does not match the bundled extensions.

The user's file is a kernel file: written atomically (temp file, fsync,
``os.replace``) and opened without following symlinks, so an extension that
can write somewhere under the data dir cannot point it elsewhere. Extensions
get no API to it: only ``main.py extensions grant`` and the kernel's
``/grant`` command write it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from core.extensions.access.grants import Change, GrantRequest
from core.extensions.loading.code_digest import code_digest
from core.extensions.loading.isolation_choice import (  # where they live: said once there
    BUNDLED_DIR as BUNDLED_DIR,
    BUNDLED_GRANTS_FILE as BUNDLED_GRANTS_FILE,
)
from core.extensions.loading.manifest import MANIFEST_FILE, load_manifest
from core.runtime.errors import HearthError

log = logging.getLogger("core.grants")

GRANTS_FILE = "grants.json"
BUNDLED_RANK = 0.0  # bundled extensions are the most established providers


class GrantStoreError(HearthError):
    """The grants file cannot be read or written (names the file)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """One recorded grant: the digests granted (request and code), when, what it
    said, what it replaces."""

    digest: str
    granted_at: float
    described: tuple[str, ...]
    replaces: dict[str, str]  # name -> extension it takes it from
    code: str | None = None  # None: granted before grants bound code (adopt_code)


@dataclass(frozen=True, slots=True)
class BundledGrant:
    """The project's grant of one bundled extension: its request and its code."""

    request: str
    code: str


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
                    code=_optional_str(entry.get("code")),
                )
            except (TypeError, ValueError) as exc:
                raise GrantStoreError(
                    f"{self.path}: entry {ext_id!r} is malformed ({exc})"
                ) from exc
        return out

    def is_bundled(self, request: GrantRequest) -> bool:
        """Granted by the project: listed in bundled_grants.yaml with this request
        and this code."""
        entry = self.bundled.get(request.ext_id)
        return (
            entry is not None
            and entry.request in request.covering_digests()
            and entry.code == request.code
        )

    def grant_for(self, request: GrantRequest) -> Grant | None:
        """The user's grant that covers exactly this request and this code, if any."""
        grant = self.grants().get(request.ext_id)
        if grant is None or grant.digest not in request.covering_digests():
            return None
        return grant if grant.code == request.code else None

    def change_since_grant(self, request: GrantRequest) -> Change | None:
        """What differs from the grant recorded for this id — the user's, else the
        project's: ``"request"``, ``"code"``, or ``None`` (none recorded, or equal)."""
        grant = self.grants().get(request.ext_id)
        bundled = self.bundled.get(request.ext_id)
        if grant is not None:
            granted: tuple[str, str | None] = (grant.digest, grant.code)
        elif bundled is not None:
            granted = (bundled.request, bundled.code)
        else:
            return None
        if granted[0] not in request.covering_digests():
            return "request"
        return "code" if granted[1] != request.code else None

    def adopt_code(self, request: GrantRequest) -> bool:
        """Bind a grant recorded before grants bound code to ``request.code``, the
        code present now (the first start after the upgrade); True if it did."""
        raw = self._read()
        entry = raw.get(request.ext_id)
        if not isinstance(entry, dict) or entry.get("code") is not None:
            return False
        if entry.get("digest") not in request.covering_digests():
            return False
        entry["code"] = request.code
        self._write(raw)
        log.warning(
            "grant of %s was recorded before grants bound code: bound now to its files as "
            "they are (code %s); a later change of its code asks for a new grant",
            request.ext_id,
            request.code,
        )
        return True

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
            code=request.code,
        )
        raw[request.ext_id] = {
            "digest": grant.digest,
            "code": grant.code,
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


def load_bundled_grants(path: Path) -> dict[str, BundledGrant]:
    """``{extension id: BundledGrant}`` from the project's committed file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise GrantStoreError(f"{path}: cannot read ({exc})") from exc
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise GrantStoreError(f"{path}: must map extension ids to {{request, code}}")
    out: dict[str, BundledGrant] = {}
    for ext_id, entry in raw.items():
        if not (
            isinstance(entry, dict)
            and set(entry) == {"request", "code"}
            and all(isinstance(v, str) for v in entry.values())
        ):
            raise GrantStoreError(
                f"{path}: {ext_id}: must be {{request: DIGEST, code: DIGEST}} (got {entry!r}); "
                "run `make bundled-grants`"
            )
        out[str(ext_id)] = BundledGrant(entry["request"], entry["code"])
    return out


def bundled_grants(extensions_dir: Path = BUNDLED_DIR) -> dict[str, BundledGrant]:
    """What ``bundled_grants.yaml`` must say for the extensions under ``extensions_dir``
    (each one's in-process request, which also covers it isolated, and its code)."""
    out: dict[str, BundledGrant] = {}
    for ext_dir in sorted(p for p in extensions_dir.iterdir() if (p / MANIFEST_FILE).is_file()):
        code = code_digest(ext_dir)
        request = GrantRequest.from_manifest(
            load_manifest(ext_dir), default_isolation="inprocess", code=code
        )
        out[request.ext_id] = BundledGrant(request.digest, code)
    return out


def write_bundled_grants(path: Path = BUNDLED_GRANTS_FILE) -> None:
    """Rewrite the project's bundled grants for the bundled extensions as they are
    (``make bundled-grants``: run it after changing a bundled extension)."""
    lines = [
        "# Extensions the project grants (ADR 0018, ADR 0044): id -> the digests of its",
        "# request (core/extensions/access/grants.py) and of its code",
        "# (core/extensions/loading/code_digest.py).",
        "# Rewritten by `make bundled-grants`; a test fails while it does not match.",
    ]
    for ext_id, grant in bundled_grants(path.parent).items():
        lines.append(f"{ext_id}: {{request: {grant.request}, code: {grant.code}}}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _optional_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"code must be a string, got {value!r}")
