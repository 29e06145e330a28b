"""Where an extension runs when its manifest does not say (ADR 0086).

Sandboxed by default: an extension that is not bundled runs in a plugin host
(``isolation.default``, ``process`` unless the user's settings say otherwise),
so a community extension is confined without its author or the user knowing
to ask. Running inside the kernel is then an explicit choice — ``isolation:
inprocess`` in its manifest — that the user grants. Bundled extensions keep
their defaults: they run in the kernel unless their manifest says otherwise,
as the project's grant of them (``bundled_grants.yaml``) assumes. "Bundled"
means the project lists the id in that file: a copy of a bundled extension
elsewhere is still one, and an extension the user adds is not, wherever it
lives.
"""

from __future__ import annotations

from functools import cache

import yaml

from core.config import PROJECT_ROOT
from core.extensions.loading.manifest import Manifest

__all__ = [
    "BUNDLED_DIR",
    "BUNDLED_GRANTS_FILE",
    "IN_PROCESS",
    "ISOLATED",
    "PROCESS",
    "WASM",
    "bundled_ids",
    "isolation_of",
]

BUNDLED_DIR = PROJECT_ROOT / "sandbox" / "extensions"
BUNDLED_GRANTS_FILE = BUNDLED_DIR / "bundled_grants.yaml"
IN_PROCESS = "inprocess"
PROCESS = "process"
WASM = "wasm"
ISOLATED = frozenset({PROCESS, WASM})  # out of the kernel's process: a plugin host, a module


@cache
def bundled_ids() -> frozenset[str]:
    """The ids of the bundled extensions: the keys of the project's grants file
    (read once; a missing or unreadable file lists none, and ``GrantStore``
    reports what is wrong with it)."""
    try:
        raw = yaml.safe_load(BUNDLED_GRANTS_FILE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return frozenset()
    return frozenset(str(key) for key in raw) if isinstance(raw, dict) else frozenset()


def isolation_of(manifest: Manifest, default: str) -> str:
    """Where it runs: its manifest's ``isolation``; else in the kernel when it is
    bundled, or a declarative agent (no ``entrypoint``: no code of its own, the
    kernel's agent runs its manifest); else ``default`` (``isolation.default``)."""
    if manifest.isolation is not None:
        return manifest.isolation
    if manifest.id in bundled_ids() or manifest.entrypoint is None:
        return IN_PROCESS
    return default
