"""``deploy/hearth.service`` is hardened, and bubblewrap still confines under it (ADR 0047).

systemd is not PID 1 here, so the unit cannot be started; ``systemd-analyze
security --offline`` scores it, and the settings that could stop bubblewrap
are emulated from the unit's own lines: a mount namespace with the file
system read-only but ``ReadWritePaths=`` (``ProtectSystem=strict``), empty
``/tmp``, ``/home``, ``/root`` and ``/dev``, a ``hidepid=invisible`` /proc, the
seccomp allow list of ``SystemCallFilter=`` (where python3-seccomp is
installed), then an unprivileged user (``User=``) with no capabilities and
``no_new_privs``. Inside it the hostile plugin host of
``test_isolation_privileges`` must stay contained.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from test_isolation_hostile import needs_bwrap
from test_isolation_privileges import (
    ATTACK,
    assert_contained,
    leftovers,
    reachable_binds,
    world_reachable,
)

from conftest import PROJECT_ROOT
from core.extensions.isolation.kernel.confinement import SandboxSpec, bwrap_argv, probe
from core.extensions.isolation.kernel.launch import host_environment

UNIT = PROJECT_ROOT / "deploy" / "hearth.service"
MAX_EXPOSURE = 3.5
# Each of these stops bwrap from mounting the sandbox's /proc or its user namespace.
BREAK_BWRAP = (
    "RestrictNamespaces",
    "PrivateUsers",
    "ProtectKernelTunables",
    "ProtectKernelLogs",
    "ProcSubset",
)
PYTHON = "/usr/bin/python3"  # readable by the unprivileged user, unlike one under /root


def service_lines(text: str) -> list[tuple[str, str]]:
    """``(key, value)`` of the ``[Service]`` section, in order (keys may repeat)."""
    section, lines = "", []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            lines.append((key.strip(), value.strip()))
    return lines


def test_the_unit_scores_as_hardened_without_what_breaks_bubblewrap():
    keys = {key for key, _ in service_lines(UNIT.read_text())}
    assert not keys & set(BREAK_BWRAP)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    done = subprocess.run(
        [analyze, "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert found, done.stdout + done.stderr
    assert float(found.group(1)) <= MAX_EXPOSURE, done.stdout


# Runs as root in a mount namespace of its own: the unit's settings, then exec.
EMULATE = r"""
import json, os, subprocess, sys
plan = json.loads(sys.argv[1])

def mount(*args):
    subprocess.run(["mount", "-n", *args], check=True)  # -n: /run is read-only now

def inaccessible(path, mode="0755"):
    if os.path.isdir(path):
        mount("-t", "tmpfs", "-o", f"ro,mode={mode}", "tmpfs", path)

points = [line.split()[4] for line in open("/proc/self/mountinfo")]
if plan["protect_system"] == "strict":
    for point in points:
        if not point.startswith(("/proc", "/sys", "/dev")):
            subprocess.run(["mount", "-n", "-o", "remount,bind,ro", point], check=False)
if plan["private_tmp"]:
    for path in ("/tmp", "/var/tmp"):
        # a checkout under /tmp (a CI clone) stays visible, as /opt/hearth would be
        kept = [(p, os.open(p, os.O_PATH)) for p in plan["keep"] if p.startswith(path + "/")]
        mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", path)
        for kept_path, fd in kept:
            os.makedirs(kept_path, exist_ok=True)
            mount("--bind", f"/proc/{os.getpid()}/fd/{fd}", kept_path)
            os.close(fd)
if plan["protect_home"]:
    for path in ("/home", "/root", "/run/user"):
        inaccessible(path)
if plan["private_devices"]:
    staging = plan["staging"]  # an existing empty directory: the root is read-only now
    mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", staging)
    for node in ("null", "zero", "full", "random", "urandom", "tty"):
        open(f"{staging}/{node}", "w").close()
        mount("--bind", f"/dev/{node}", f"{staging}/{node}")
    mount("--move", staging, "/dev")
if plan["protect_kernel_modules"]:
    for path in ("/usr/lib/modules", "/lib/modules"):
        inaccessible(path, "0000")
if plan["protect_proc"]:
    mount("-t", "proc", "-o", f"hidepid={plan['protect_proc']}", "proc", "/proc")
if plan["protect_kernel_tunables"]:  # only to show the emulation catches what breaks bwrap
    mount("--bind", "/proc/sys", "/proc/sys")
    mount("-o", "remount,bind,ro", "/proc/sys")
for path in plan["read_write"]:
    mount("--bind", path, path)
    mount("-o", "remount,bind,rw", path)
if plan["syscalls"]:
    import seccomp
    errno = seccomp.ERRNO(1)
    syscalls = seccomp.SyscallFilter(defaction=errno)
    for name in plan["syscalls"]:
        try:
            syscalls.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # a name this libseccomp does not know
    syscalls.load()
os.execvp(plan["argv"][0], plan["argv"])
"""


def unit_plan(lines: list[tuple[str, str]], read_write: list[str]) -> dict[str, object]:
    """What ``EMULATE`` applies, read from the unit's ``[Service]`` lines."""
    settings = dict(lines)
    yes = {key for key, value in lines if value in ("yes", "true")}
    return {
        "protect_system": settings.get("ProtectSystem", ""),
        "private_tmp": "PrivateTmp" in yes,
        "protect_home": "ProtectHome" in yes,
        "private_devices": "PrivateDevices" in yes,
        "protect_kernel_modules": "ProtectKernelModules" in yes,
        "protect_kernel_tunables": "ProtectKernelTunables" in yes,
        "protect_proc": settings.get("ProtectProc", ""),
        "read_write": read_write,
        "no_new_privs": "NoNewPrivileges" in yes,
        "no_capabilities": settings.get("CapabilityBoundingSet", None) == "",
        "syscalls": allowed_syscalls([v for k, v in lines if k == "SystemCallFilter"]),
    }


def allowed_syscalls(filters: list[str]) -> list[str]:
    """System calls ``SystemCallFilter=`` lines allow (as systemd-analyze expands the
    groups); empty when there are none, or no way to enforce them here."""
    analyze = shutil.which("systemd-analyze")
    if not filters or analyze is None or _no_seccomp():
        return []
    allowed: set[str] = set()
    for value in filters:
        names = set().union(*(expand(analyze, item) for item in value.lstrip("~").split()))
        allowed = allowed - names if value.startswith("~") else allowed | names
    return sorted(allowed)


def expand(analyze: str, item: str) -> set[str]:
    """``@group`` → its system calls, groups within it included; a name → itself."""
    if not item.startswith("@"):
        return {item}
    listing = subprocess.run(
        [analyze, "syscall-filter", item], capture_output=True, text=True, check=True
    ).stdout
    names: set[str] = set()
    for line in listing.splitlines():
        entry = line.strip()
        if line.startswith("    ") and entry and not entry.startswith("#"):
            names |= expand(analyze, entry) if entry.startswith("@") else {entry}
    return names


def _no_seccomp() -> bool:
    done = subprocess.run([PYTHON, "-c", "import seccomp"], capture_output=True, check=False)
    return done.returncode != 0


def run_under_unit(
    lines: list[tuple[str, str]], base: Path
) -> tuple[subprocess.CompletedProcess[str], list[Path]]:
    """The hostile host confined by bwrap inside the emulated unit, and any file it
    managed to leave in a directory that should have been read-only."""
    data_dir, ext_dir, staging = base / "data", base / "ext", base / "dev"
    staging.mkdir()
    for directory in (base, data_dir, ext_dir):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o777)
    spec = SandboxSpec(ext_dir, data_dir, network=False)
    confined = reachable_binds(bwrap_argv(spec, str(probe().bwrap), host_environment(data_dir)))
    marker = f"hearth-attack-{uuid.uuid4().hex}.pth"
    ro_dirs = ["/usr", str(PROJECT_ROOT / "core"), str(ext_dir)]
    script = ATTACK + textwrap.dedent(f"""
        import json
        print(json.dumps(attack({str(data_dir)!r}, {ro_dirs!r}, {marker!r})))
    """)
    plan = unit_plan(lines, [str(base)])
    plan["staging"] = str(staging)
    if PROJECT_ROOT.resolve().is_relative_to("/tmp"):
        # a checkout under /tmp (a CI clone) would vanish under PrivateTmp=, where the
        # unit's /opt/hearth does not: every other setting is still emulated
        plan["private_tmp"] = False
    plan["keep"] = [str(PROJECT_ROOT.resolve())]  # the code the confined host runs
    user = ["--reuid", "65534", "--regid", "65534", "--clear-groups"]
    if plan["no_new_privs"]:
        user.append("--no-new-privs")
    if plan["no_capabilities"]:
        user += ["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]
    plan["argv"] = ["setpriv", *user, "--", *confined, PYTHON, "-I", "-c", script]
    emulator = PYTHON if plan["syscalls"] else sys.executable
    try:
        done = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                emulator,
                "-I",
                "-c",
                EMULATE,
                json.dumps(plan),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        written = leftovers(marker, [Path(d) for d in ro_dirs])
    return done, written


def needs_emulation() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to emulate the unit (mount namespace, then an unprivileged user)")
    missing = [tool for tool in ("unshare", "setpriv", "mount") if shutil.which(tool) is None]
    if missing or not world_reachable(Path(PYTHON)):
        pytest.skip(f"cannot emulate the unit here: missing {missing or [PYTHON]}")


@pytest.fixture
def base_dir():
    """Outside /tmp (``PrivateTmp=`` hides it), as ``/opt/hearth`` would be."""
    base = Path(
        tempfile.mkdtemp(prefix="hearth-unit-", dir="/opt" if os.path.isdir("/opt") else None)
    )
    yield base
    shutil.rmtree(base, ignore_errors=True)


@needs_bwrap
def test_bubblewrap_still_confines_under_the_units_hardening(base_dir):
    needs_emulation()
    lines = service_lines(UNIT.read_text())
    done, written = run_under_unit(lines, base_dir)
    if done.returncode != 0 and "namespace" in done.stderr and "uid map" not in done.stderr:
        pytest.skip(f"unprivileged user namespaces refused here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert_contained(json.loads(done.stdout))
    assert written == []


def without_mount_calls(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v.replace("@mount", "") if k == "SystemCallFilter" else v) for k, v in lines]


@needs_bwrap
@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda lines: [*lines, ("ProtectKernelTunables", "yes")], "Can't mount proc"),
        (without_mount_calls, "Operation not permitted"),
    ],
    ids=["ProtectKernelTunables", "SystemCallFilter-without-@mount"],
)
def test_the_emulation_catches_a_setting_that_breaks_bubblewrap(base_dir, change, words):
    """The emulation is strict enough to matter: hiding part of /proc, or taking
    away the mount calls, stops bwrap (which is why the unit has neither)."""
    needs_emulation()
    lines = change(service_lines(UNIT.read_text()))
    if change is without_mount_calls and not unit_plan(lines, [])["syscalls"]:
        pytest.skip("SystemCallFilter= cannot be emulated: python3-seccomp is not installed")
    done, _ = run_under_unit(lines, base_dir)
    assert done.returncode != 0
    assert words in done.stderr
