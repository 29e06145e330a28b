"""Test extensions on disk: their code (``ext_code``) and their grants
(``grant_all``). No pytest here, so the benchmarks (``bench/``) can set up their
kernels without loading the test tools into the process whose memory and time
they measure; ``conftest`` re-exports both for the tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

__all__ = ["LIFECYCLE", "ext_code", "grant_all"]

LIFECYCLE = """
    async def initialize(self, context):
        self.ctx = context
    async def start(self):
        pass
    async def stop(self):
        pass
    async def destroy(self):
        pass
    def health_check(self):
        return True
"""


def ext_code(body: str = "", header: str = "") -> str:
    """Source of ``main.py`` with class ``Ext``: the lifecycle plus ``body``."""
    body = textwrap.indent(textwrap.dedent(body), "    ")
    return f"{textwrap.dedent(header)}\nclass Ext:{LIFECYCLE}\n{body}\n"


def grant_all(extensions_dir: Path, data_dir: Path, *, only: str | None = None) -> list[str]:
    """Grant every valid extension under ``extensions_dir`` (or just ``only``) in
    ``data_dir``'s grants file, as the user would with ``main.py extensions grant
    --yes``: the one place test kernels get their fixture extensions granted.
    A grant for the in-process request also covers the same manifest isolated;
    it binds the code as it is now, so a test that changes an extension's code
    grants it again (ADR 0044)."""
    from core.extensions.access.grant_store import GrantStore
    from core.extensions.access.grants import GrantRequest
    from core.extensions.loading.code_digest import code_digest
    from core.extensions.loading.manifest import ManifestError, load_manifest

    store = GrantStore(data_dir)
    granted = []
    for ext_dir in sorted(p for p in extensions_dir.iterdir() if p.is_dir()):
        if only is not None and ext_dir.name != only:
            continue
        try:
            manifest = load_manifest(ext_dir)
        except ManifestError:
            continue
        code = code_digest(ext_dir)
        store.record(GrantRequest.from_manifest(manifest, default_isolation="inprocess", code=code))
        granted.append(manifest.id)
    return granted
