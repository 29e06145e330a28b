"""Issue 11 item 1: root inside bwrap must not keep capabilities.

A hostile isolated extension (the kernel runs as root, as in CI) tries to
remount its read-only binds writable, create a device node, write outside
its data dir, start a user namespace of its own, and reads its capability
sets. The same attack runs once more with the sandbox started by an
unprivileged user. ``doctor`` must report the capabilities a real probe
host has, and never call a host with capabilities confined.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest
from test_doctor import doctor
from test_isolation_hostile import command, isolated, needs_bwrap, settings

from conftest import PROJECT_ROOT, ext_code
from core.extensions.isolation.kernel.confinement import SandboxSpec, bwrap_argv, probe
from core.extensions.isolation.kernel.launch import host_environment
from core.extensions.isolation.kernel.selfcheck import HostProbe, judge
from support.harness import running_kernel

# Shared by the isolated extension and the unprivileged run: returns what each attempt did.
ATTACK = """
import ctypes, os

MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND = 2, 4, 32, 4096
CLONE_NEWUSER = 0x10000000
S_IFCHR = 0o020000


def attack(data_dir, ro_dirs, marker):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
    libc.mknod.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint64]

    def outcome(rc):
        return "ok" if rc == 0 else os.strerror(ctypes.get_errno())

    def write(path):
        try:
            with open(path, "w") as file:
                file.write("")
        except OSError as exc:
            return exc.strerror
        return "ok"

    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    report = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
    for directory in ro_dirs:
        flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV
        report["remount " + directory] = outcome(libc.mount(None, directory.encode(), None, flags, None))
        report["write " + directory] = write(os.path.join(directory, marker))
    node = os.path.join(data_dir, "mem").encode()
    report["mknod"] = outcome(libc.mknod(node, S_IFCHR | 0o600, os.makedev(1, 1)))
    report["write /"] = write("/" + marker)
    report["write beside data dir"] = write(os.path.join(os.path.dirname(data_dir), marker))
    report["unshare user"] = outcome(libc.unshare(CLONE_NEWUSER))
    report["write data dir"] = write(os.path.join(data_dir, "own.txt"))
    return report
"""

ATTACKER = ext_code(
    header=ATTACK,
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import json, sys
        import core

        async def attack_cmd(args, turn):
            ro_dirs = [sys.prefix, os.path.dirname(core.__file__), os.path.dirname(__file__)]
            return json.dumps(attack(str(self.ctx.data_dir), ro_dirs, args))

        return [Command("attack", "try to leave the sandbox", attack_cmd)]
    """,
)

ZERO = "0000000000000000"


def assert_contained(report: dict[str, str]) -> None:
    assert (report["CapEff"], report["CapPrm"], report["CapBnd"]) == (ZERO, ZERO, ZERO)
    assert report["NoNewPrivs"] == "1"
    refused = {k: v for k, v in report.items() if k.startswith(("remount", "write /", "mknod"))}
    refused["unshare user"] = report["unshare user"]
    assert [k for k, v in refused.items() if v == "ok"] == []
    assert sum(k.startswith("remount ") for k in report) == sum(
        k.startswith("write /") and k != "write /" for k in report
    )
    assert report["write data dir"] == "ok"


def leftovers(marker: str, dirs: list[Path]) -> list[Path]:
    found = [d / marker for d in dirs if (d / marker).exists()]
    for path in found:  # old code let the attack write there: do not leave it behind
        path.unlink()
    return found


@needs_bwrap
async def test_root_in_the_sandbox_has_no_capabilities_and_cannot_remount(
    make_ext, settings_file, tmp_path: Path
):
    ext_dir = make_ext("attacker", ATTACKER, isolated())
    # Beside the data dir is, here, inside the sandbox's own /tmp: it must not show outside.
    marker = f"hearth-attack-{uuid.uuid4().hex}.pth"
    targets = [Path(sys.prefix), PROJECT_ROOT / "core", ext_dir, tmp_path / "data"]
    try:
        async with running_kernel(settings(settings_file)) as kernel:
            report = json.loads(await command(kernel, f"/attack {marker}"))
    finally:
        written = leftovers(marker, targets)
    assert_contained(report)
    assert set(report) >= {f"remount {sys.prefix}", f"remount {PROJECT_ROOT / 'core'}"}
    assert written == []
    assert not (tmp_path / "data" / "extensions" / "attacker" / "mem").exists()


@needs_bwrap
def test_a_sandbox_started_by_an_unprivileged_user_is_contained_too():
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user for the attack")
    base = Path(tempfile.mkdtemp(prefix="hearth-unpriv-", dir="/tmp"))
    try:
        data_dir, ext_dir = base / "data", base / "ext"
        for directory in (base, data_dir, ext_dir):
            directory.mkdir(exist_ok=True)
            directory.chmod(0o777)
        spec = SandboxSpec(ext_dir, data_dir, network=False)
        argv = reachable_binds(bwrap_argv(spec, str(probe().bwrap), host_environment(data_dir)))
        python = sys.executable if world_reachable(Path(sys.executable)) else "/usr/bin/python3"
        if not world_reachable(Path(python)):
            pytest.skip(f"no Python interpreter an unprivileged user can run ({python})")
        ro_dirs = ["/usr", str(PROJECT_ROOT / "core"), str(ext_dir)]
        marker = f"hearth-attack-{uuid.uuid4().hex}.pth"
        script = ATTACK + textwrap.dedent(f"""
            import json
            print(json.dumps(attack({str(data_dir)!r}, {ro_dirs!r}, {marker!r})))
        """)
        try:
            done = subprocess.run(
                [*argv, python, "-I", "-c", script],
                capture_output=True,
                text=True,
                timeout=30,
                user=65534,
                group=65534,
                extra_groups=[],
            )
        finally:
            written = leftovers(marker, [Path(d) for d in ro_dirs])
        if done.returncode != 0 and "namespace" in done.stderr:
            pytest.skip(f"unprivileged user namespaces refused here: {done.stderr.strip()}")
        assert done.returncode == 0, done.stderr
        assert_contained(json.loads(done.stdout))
        assert written == []
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def world_reachable(path: Path) -> bool:
    """Every directory above ``path`` can be searched by any user."""
    return all(os.stat(p).st_mode & 0o001 for p in path.resolve().parents)


def reachable_binds(argv: list[str]) -> list[str]:
    """``argv`` without the binds an unprivileged user cannot reach (e.g. a Python under /root)."""
    kept: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--ro-bind" and not world_reachable(Path(argv[i + 1]) / "x"):
            i += 3
            continue
        kept.append(argv[i])
        i += 1
    return kept


@needs_bwrap
def test_doctor_reports_the_capabilities_a_probe_host_really_has(settings_file):
    result = doctor(settings_file())
    line = next(x for x in result.stdout.splitlines() if "probe host:" in x)
    assert line.startswith("ok   isolation: plugin hosts are confined")
    assert f"CapEff {ZERO}, CapBnd {ZERO}, NoNewPrivs 1" in line
    assert "uid 65534" in line


def test_doctor_never_calls_a_host_with_capabilities_confined():
    privileged = HostProbe(True, 0, 0x1FFFEFFFFFF, 0x1FFFEFFFFFF, True, None)
    level, text = judge(privileged, "bubblewrap works")
    assert level == "fail" and text.startswith("PLUGIN HOSTS ARE NOT CONFINED")
    assert "CapEff 000001fffeffffff" in text
    unconfined = HostProbe(False, 0, 0, 0, False, None)
    assert judge(unconfined, "switched off")[0] == "warn"
    clean = HostProbe(True, 65534, 0, 0, True, True)
    assert judge(clean, "bubblewrap works")[0] == "ok"
