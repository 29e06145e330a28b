"""Confinement of a plugin host with bubblewrap (``bwrap``).

The host sees a minimal filesystem: ``/usr`` and the Python environment
read-only, the kernel's ``core`` package read-only, its own extension
directory and the snapshot of its code it imports (ADR 0073) read-only, its
data dir read-write, declared ``permissions.paths``,
an empty size-limited ``/tmp``, a read-only root, and a network namespace
of its own unless ``permissions.network`` is true. ``--unshare-all`` includes
a PID namespace, so killing ``bwrap`` kills every process the plugin started
— even one that left the process group.

The host runs as an unprivileged id (``SANDBOX_ID``) in a user namespace of
its own, with every capability dropped (also from the bounding set),
``no_new_privs`` set (bwrap always sets it) and further user namespaces
disabled: even when the kernel runs as root, the plugin cannot remount its
read-only binds, create device nodes or regain capabilities (ADR 0010).
Where bwrap is missing or user namespaces are refused, ``probe`` says why
and the caller falls back loudly.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core.config import PROJECT_ROOT
from core.extensions.isolation.protocol.errors import ConfinementError

# Files under /etc a Python process may reasonably need (read-only, if present).
_ETC_ALWAYS = ("/etc/localtime", "/etc/ld.so.cache", "/etc/ssl", "/etc/ca-certificates")
_ETC_NETWORK = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf")
_ROOT_LINKS = ("/bin", "/lib", "/lib64", "/sbin")
PROBE_TIMEOUT_S = 10.0
SANDBOX_ID = 65534  # uid and gid inside the sandbox ("nobody"), mapped to the kernel's own
# Every bwrap run: own namespaces (user included), no capabilities, no nested user namespaces.
_PRIVILEGE_OPTIONS = (
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--uid",
    str(SANDBOX_ID),
    "--gid",
    str(SANDBOX_ID),
    "--die-with-parent",
    "--new-session",
    "--clearenv",
)


@dataclass(frozen=True, slots=True)
class GrantedPath:
    """One ``permissions.paths`` entry: ``/abs/path`` (read-write) or ``/abs/path:ro``."""

    path: Path
    writable: bool

    @classmethod
    def parse(cls, entry: str) -> GrantedPath:
        raw, writable = (entry[:-3], False) if entry.endswith(":ro") else (entry, True)
        path = Path(raw).expanduser()
        if not path.is_absolute():
            raise ConfinementError(f"permissions.paths: {entry!r} must be an absolute path")
        if not path.exists():
            raise ConfinementError(f"permissions.paths: {entry!r} does not exist")
        return cls(path.resolve(), writable)


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What one plugin host may see."""

    ext_dir: Path
    data_dir: Path
    network: bool
    paths: tuple[GrantedPath, ...] = field(default_factory=tuple)
    tmp_bytes: int = 64 * 1024 * 1024
    code_dir: Path | None = None  # the snapshot of its code it imports (ADR 0073)


@dataclass(frozen=True, slots=True)
class ConfinementStatus:
    """Whether bwrap confinement works on this machine, and why not."""

    available: bool
    detail: str
    bwrap: str | None = None


def bwrap_argv(spec: SandboxSpec, bwrap: str, env: dict[str, str]) -> list[str]:
    """``bwrap`` options (ending in ``--``) that confine a host to ``spec``."""
    argv = [bwrap, *_PRIVILEGE_OPTIONS]
    if spec.network:
        argv.append("--share-net")
    argv += _base_filesystem(spec.network, spec.tmp_bytes)
    for path in _python_roots():
        argv += ["--ro-bind", path, path]
    core = str(PROJECT_ROOT / "core")
    argv += ["--ro-bind", core, core]
    argv += ["--ro-bind", str(spec.ext_dir), str(spec.ext_dir)]
    if spec.code_dir is not None:
        argv += ["--ro-bind", str(spec.code_dir), str(spec.code_dir)]
    argv += ["--bind", str(spec.data_dir), str(spec.data_dir)]
    for granted in spec.paths:
        argv += [
            "--bind" if granted.writable else "--ro-bind",
            str(granted.path),
            str(granted.path),
        ]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    # Last: the sandbox's own root becomes read-only (binds keep their own flags).
    argv += ["--remount-ro", "/", "--chdir", str(spec.data_dir), "--"]
    return argv


def _base_filesystem(network: bool, tmp_bytes: int) -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr"]
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    for path in (*_ETC_ALWAYS, *(_ETC_NETWORK if network else ())):
        argv += ["--ro-bind-try", path, path]
    # /tmp first: binds below it (test dirs, data dirs) are mounted on top.
    # --size: the tmpfs is capped, so /tmp cannot take the machine's RAM.
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    return argv


def _python_roots() -> list[str]:
    """Directories holding the interpreter, stdlib and site-packages (outside /usr)."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    }
    roots = sorted(os.path.realpath(p) for p in candidates if p)
    roots += [p for p in sorted(candidates) if p and os.path.realpath(p) != p]
    kept: list[str] = []
    for root in sorted(set(roots), key=len):
        if root == "/usr" or root.startswith("/usr/") or not os.path.isdir(root):
            continue
        if any(root.startswith(k.rstrip("/") + "/") for k in kept):
            continue
        kept.append(root)
    return kept


@functools.cache
def probe(bwrap: str | None = None) -> ConfinementStatus:
    """Run a trivial Python inside bwrap once per process; cached."""
    path = bwrap or shutil.which("bwrap")
    if path is None:
        return ConfinementStatus(False, "bubblewrap (bwrap) is not installed")
    argv = [path, *_PRIVILEGE_OPTIONS, *_base_filesystem(network=False, tmp_bytes=1024 * 1024)]
    for root in _python_roots():
        argv += ["--ro-bind", root, root]
    argv += ["--remount-ro", "/", "--", sys.executable, "-I", "-c", "pass"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ConfinementStatus(False, f"{path} could not run: {exc}", path)
    if done.returncode != 0:
        detail = " ".join(done.stderr.split())[:300] or f"exit code {done.returncode}"
        return ConfinementStatus(False, f"{path} failed (user namespaces refused?): {detail}", path)
    return ConfinementStatus(True, f"bubblewrap works ({path})", path)
