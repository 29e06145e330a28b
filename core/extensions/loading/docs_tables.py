"""The docs' tables of what the contract declares, rendered from the declarations.

docs/hooks.md's table of hook points comes from the ``@hook_point`` rows
(``contract.hook_specs``), docs/isolation.md's table of permissions from the
``Permission``s and ``@needs`` of ``ExtensionContext`` (``contract.permissions``):
each sits in its page between two marker comments. ``python -m
core.extensions.loading.docs_tables`` rewrites them; a test fails naming the
page when one no longer says what the code declares (issue 42, ADR 0084).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.extensions.contract import HOOK_SPECS, ExtensionContext
from core.extensions.contract.permissions import declared_needs
from core.extensions.loading.manifest import PERMISSION_FLAGS
from core.runtime.datadir import PROJECT_ROOT

__all__ = ["GENERATED", "Generated", "render_hook_table", "render_permission_table", "stale"]


def render_hook_table() -> str:
    """docs/hooks.md's table: one row per hook point, in declaration order."""
    rows = ["| method | when | return |", "|---|---|---|"]
    for spec in HOOK_SPECS:
        function = vars(spec.protocol)[spec.method]
        params = list(inspect.signature(function).parameters)[1:]
        call = f"`{spec.method}({', '.join(params)})`"
        method = " + ".join([*(f"`{a}`" for a in spec.attributes), call])
        rows.append(f"| {method} | {spec.when} | {spec.returns} |")
    return "\n".join(rows)


# the manifest's permission keys that no context method declares: topics, network, paths
_SCOPES = """\
| `emit` | `emit(topic, ...)` | `["*"]` | `["<id>.*"]` |
| `subscribe` | `subscribe_event(topic, ...)` | `["*"]` | `["<id>.*"]` |
| `network` | sockets beyond a private loopback | `true` (not enforceable) | `false` |
| `paths` | extra host paths visible in the sandbox | `[]` | `[]` |"""


def render_permission_table() -> str:
    """docs/isolation.md's table: the scopes, then each declared permission with the
    context methods that declare they need it."""
    methods: dict[str, list[str]] = {}
    for name, needs in declared_needs(ExtensionContext).items():
        for need in needs:
            methods.setdefault(need.permission.key, []).append(f"`{name}`")
    rows = [
        "| key | guards | in-process default | isolated default |",
        "|-----|--------|--------------------|------------------|",
        _SCOPES,
    ]
    for permission in PERMISSION_FLAGS:
        guards = ", ".join(methods.get(permission.key, []))
        if permission.guards:
            guards = f"{guards} ({permission.guards})" if guards else permission.guards
        default = f"`{str(permission.default).lower()}`"
        rows.append(f"| `{permission.key}` | {guards} | {default} | {default} |")
    return "\n".join(rows)


@dataclass(frozen=True, slots=True)
class Generated:
    """One generated table: the page, its marker's name, how to render it."""

    page: str  # relative to the project root
    marker: str
    render: Callable[[], str]

    def pattern(self) -> re.Pattern[str]:
        return re.compile(
            rf"(<!-- {self.marker}: generated[^\n]*-->\n)(.*?)(\n<!-- /{self.marker} -->)",
            re.DOTALL,
        )

    def apply(self, text: str) -> str:
        """``text`` with this table rendered between its markers; ``ValueError`` naming
        the page and the marker when they are missing."""
        found = self.pattern().search(text)
        if found is None:
            raise ValueError(f"{self.page}: no <!-- {self.marker}: generated ... --> markers")
        return text[: found.start(2)] + self.render() + text[found.end(2) :]


GENERATED: tuple[Generated, ...] = (
    Generated("docs/hooks.md", "hook-points", render_hook_table),
    Generated("docs/isolation.md", "permissions", render_permission_table),
)


def stale(root: Path = PROJECT_ROOT, *, write: bool = False) -> list[str]:
    """The pages whose tables differ from the declarations (rewritten when ``write``)."""
    differing = []
    for table in GENERATED:
        path = root / table.page
        text = path.read_text(encoding="utf-8")
        wanted = table.apply(text)
        if wanted != text:
            differing.append(table.page)
            if write:
                path.write_text(wanted, encoding="utf-8")
    return differing


if __name__ == "__main__":  # python -m core.extensions.loading.docs_tables
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else PROJECT_ROOT
    for page in stale(root, write=True):
        print(f"rewrote the table in {page}")
