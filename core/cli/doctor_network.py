"""``doctor``: in-process extensions that open the network without saying so (ADR 0086).

An isolated extension without ``permissions.network: true`` has no network:
its sandbox has only a private loopback. An in-process one cannot be stopped —
it runs with the kernel's rights — so the least Hearth can do is tell the user
(seed 003: "no network access without explicit policy profiles"). The check is
a **static scan** of its Python source, not a trace: an ``import`` of a socket
or HTTP client module of the standard library or a common package, or a call
of asyncio's connection functions. Code that reaches the network through
another library, or builds the import at run time, is not seen; a module that
is imported but never used is reported all the same. The remedy is one of two:
declare ``permissions.network: true`` (the user sees it when granting), or run
the extension isolated.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from core.config import Settings
from core.extensions.loading.isolation_choice import IN_PROCESS, isolation_of
from core.extensions.loading.manifest import MANIFEST_FILE, ManifestError, load_manifest

__all__ = ["NETWORK_MODULES", "NetworkUse", "network_uses", "undeclared_network_lines"]

# socket and HTTP clients: the standard library's and the common packages' (their top
# level: `import httpx.something` counts as httpx)
NETWORK_MODULES = frozenset(
    {
        "socket",
        "ssl",
        "http.client",
        "urllib.request",
        "smtplib",
        "ftplib",
        "imaplib",
        "poplib",
        "httpx",
        "aiohttp",
        "requests",
        "urllib3",
        "websockets",
        "websocket",
    }
)
# asyncio's (and urllib's) ways to open a connection without importing a client
CONNECTING_CALLS = frozenset(
    {"open_connection", "create_connection", "create_datagram_endpoint", "start_server", "urlopen"}
)
SKIPPED_PARTS = frozenset({"tests", "__pycache__"})
SHOWN = 3


@dataclass(frozen=True, slots=True)
class NetworkUse:
    """One place in an extension's source that opens (or imports what opens) the network."""

    path: str  # relative to the extension's directory
    line: int
    what: str  # "imports httpx", "calls open_connection"

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.what}"


def network_uses(ext_dir: Path) -> list[NetworkUse]:
    """Every network use the scan finds in ``ext_dir``'s ``*.py`` files (but its
    ``tests/`` and a top-level ``data/``), in file and line order. A file that
    does not parse is left out: the loader reports it."""
    found: list[NetworkUse] = []
    for path in sorted(ext_dir.rglob("*.py")):
        relative = path.relative_to(ext_dir)
        if SKIPPED_PARTS.intersection(relative.parts) or relative.parts[0] == "data":
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        found += sorted(_uses(tree, relative.as_posix()), key=lambda use: use.line)
    return found


def undeclared_network_lines(settings: Settings) -> list[str]:
    """One ``doctor`` line per enabled in-process extension whose source opens the
    network and whose manifest does not declare ``permissions.network: true``."""
    root = settings.extensions_dir
    if not root.is_dir():
        return []
    lines = []
    for ext_dir in sorted(p for p in root.iterdir() if (p / MANIFEST_FILE).is_file()):
        try:
            manifest = load_manifest(ext_dir)
        except ManifestError:
            continue  # the extensions' report says what is wrong with it
        if not manifest.enabled or manifest.permissions.network is True:
            continue
        if isolation_of(manifest, settings.isolation.default) != IN_PROCESS:
            continue  # its sandbox enforces permissions.network
        uses = network_uses(ext_dir)
        if not uses:
            continue
        shown = "; ".join(str(use) for use in uses[:SHOWN])
        more = f" and {len(uses) - SHOWN} more" if len(uses) > SHOWN else ""
        lines.append(
            f"extension {manifest.id}: in-process code opens the network without "
            f"permissions.network ({shown}{more}; found by a static scan of its source) — "
            f"declare `permissions.network: true` in {ext_dir / MANIFEST_FILE}, or run it "
            "isolated (`isolation: process`), where the sandbox enforces it"
        )
    return lines


def _uses(tree: ast.AST, path: str) -> list[NetworkUse]:
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Call) and _called_name(node.func) in CONNECTING_CALLS:
            uses.append(NetworkUse(path, node.lineno, f"calls {_called_name(node.func)}"))
            continue
        else:
            continue
        network = next((name for name in names if _is_network_module(name)), None)
        if network is not None:
            uses.append(NetworkUse(path, node.lineno, f"imports {network}"))
    return uses


def _is_network_module(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:n]) in NETWORK_MODULES for n in range(1, len(parts) + 1))


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None
