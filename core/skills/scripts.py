"""Run one file of a skill's ``scripts/`` folder, confined like an isolated extension.

The script runs under bubblewrap with the plugin hosts' confinement
(``core.extensions.isolation.kernel.confinement``): its own namespaces, no
capabilities, a read-only root, the skill's folder read-only, a fresh scratch
directory writable (its working directory and ``HOME``), a size-limited
``/tmp``, and no network unless ``skills.network`` names the skill. Resource
limits (address space, CPU time, file size, open files) are set on the
process before it starts, its tree is born in a cgroup where the machine
offers one (the plugin hosts' gate, ``process.GATE``: ``/bin/sh`` waits until
it has been moved there, then ``exec``s bwrap), and a wall-clock limit kills
the whole tree (bwrap's PID namespace dies with it). Where bubblewrap cannot
run, a script is refused unless network was granted — then the network
cannot be taken away anyway, and it runs with the limits only, loudly — the
same rule as for isolated extensions (``launch.plan_launch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from core.extensions.isolation.host.limits import HostLimits, apply_limits
from core.extensions.isolation.kernel.cgroups import HostCgroup
from core.extensions.isolation.kernel.confinement import SandboxSpec, bwrap_argv
from core.extensions.isolation.kernel.launch import (
    confinement_status,
    host_environment,
    warn_unconfined,
)
from core.extensions.isolation.kernel.process import GATE
from core.extensions.isolation.kernel.watchdog import cgroup_support
from core.skills.errors import SkillScriptError
from core.skills.files import resolve_inside
from core.skills.format import Skill

__all__ = ["SCRIPTS_DIR", "ScriptLimits", "ScriptRun", "run_script"]

log = logging.getLogger("core.skills")
SCRIPTS_DIR = "scripts"
ARGS_MAX = 64
ARG_MAX_CHARS = 4096


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    """What one run may use (``skills.*``) and how it is confined (``isolation.*``)."""

    timeout_s: float = 60.0
    memory_mb: int = 512
    tmp_mb: int = 64
    output_max_chars: int = 20_000
    confinement: str = "auto"  # isolation.confinement: auto | bwrap | none
    cgroups: str = "auto"  # isolation.cgroups: auto | none


@dataclass(frozen=True, slots=True)
class ScriptRun:
    """The outcome of one run, as the model reads it (``text``)."""

    skill: str
    script: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    confined: bool
    network: bool
    timed_out: bool = False

    def text(self) -> str:
        how = "confined" if self.confined else "NOT confined (limits only)"
        net = "network allowed" if self.network else "no network"
        if self.timed_out:
            head = f"stopped after {self.seconds:.1f} s: over the time limit (skills.timeout_s)"
        else:
            head = f"exit code {self.exit_code} after {self.seconds:.1f} s"
        parts = [f"{self.script} of skill {self.skill}: {head}; {how}, {net}"]
        parts.append(f"stdout:\n{self.stdout}" if self.stdout else "stdout: (empty)")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr}")
        return "\n".join(parts)


async def run_script(
    skill: Skill,
    script: str,
    args: list[str],
    *,
    limits: ScriptLimits,
    network: bool,
    scratch_root: Path,
) -> ScriptRun:
    """Run ``scripts/<script>`` of ``skill`` with ``args``; raises ``SkillFileError`` for a
    path outside ``scripts/`` and ``SkillScriptError`` when it cannot be run here."""
    path = resolve_inside(skill, script, under=SCRIPTS_DIR)
    relative = path.relative_to(skill.folder.resolve()).as_posix()
    _check_args(skill.name, relative, args)
    command = _interpreter(skill.name, relative, path) + list(args)
    scratch = await asyncio.to_thread(_scratch_dir, scratch_root, skill.name)
    try:
        env = host_environment(scratch)
        status = await confinement_status(limits.confinement)
        if status.available and status.bwrap is not None:
            spec = SandboxSpec(
                skill.folder.resolve(), scratch, network, (), limits.tmp_mb * 1024 * 1024
            )
            argv, confined = bwrap_argv(spec, status.bwrap, env) + command, True
        else:
            if limits.confinement == "bwrap" or not network:
                raise SkillScriptError(
                    skill.name,
                    relative,
                    f"cannot be confined here ({status.detail}); a skill's script without "
                    "network runs only under bubblewrap",
                )
            warn_unconfined(status.detail)
            argv, confined = command, False
        return await _run(skill.name, relative, argv, env, scratch, limits, confined, network)
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, True)


def _scratch_dir(root: Path, skill: str) -> Path:
    """A new private directory for one run (removed after it)."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(tempfile.mkdtemp(prefix=f"{skill}-", dir=root)).resolve()


def _check_args(skill: str, script: str, args: list[str]) -> None:
    if len(args) > ARGS_MAX:
        raise SkillScriptError(skill, script, f"{len(args)} arguments; at most {ARGS_MAX}")
    for arg in args:
        if "\x00" in arg or len(arg) > ARG_MAX_CHARS:
            raise SkillScriptError(
                skill, script, f"an argument is not text of at most {ARG_MAX_CHARS} characters"
            )


def _interpreter(skill: str, script: str, path: Path) -> list[str]:
    """``.py`` with this Python (isolated mode), ``.sh`` with ``/bin/sh``, else the
    file itself when it is executable (its ``#!`` line decides)."""
    if path.suffix == ".py":
        return [sys.executable, "-I", str(path)]
    if path.suffix == ".sh":
        return ["/bin/sh", str(path)]
    if os.access(path, os.X_OK):
        return [str(path)]
    raise SkillScriptError(skill, script, "not a .py or .sh file, and not executable")


async def _run(
    skill: str,
    script: str,
    argv: list[str],
    env: dict[str, str],
    scratch: Path,
    limits: ScriptLimits,
    confined: bool,
    network: bool,
) -> ScriptRun:
    rlimits = HostLimits(
        memory_mb=limits.memory_mb,
        cpu_seconds=math.ceil(limits.timeout_s) + 1,
        open_files=256,
        tmp_mb=limits.tmp_mb,
        data_quota_mb=limits.tmp_mb,
    )
    cgroup = await _cgroup(skill, rlimits, limits.cgroups)
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *(GATE if cgroup is not None else ()),
        *argv,
        stdin=asyncio.subprocess.PIPE if cgroup is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=scratch,
        env=env,
        start_new_session=True,  # one process group: a timeout kills all of it
        preexec_fn=lambda: apply_limits(rlimits),
    )
    timed_out = False
    try:
        if cgroup is not None and process.stdin is not None:
            # the gate runs nothing before it is inside: what it execs is born there
            await asyncio.to_thread(cgroup.add, process.pid)
            process.stdin.write(b"go\n")
            process.stdin.close()
        cap = limits.output_max_chars
        assert process.stdout is not None and process.stderr is not None
        reading = asyncio.gather(_read(process.stdout, cap), _read(process.stderr, cap))
        try:
            async with asyncio.timeout(limits.timeout_s):
                stdout, stderr = await reading
                await process.wait()
        except TimeoutError:
            timed_out = True
            stdout, stderr = "", ""
    finally:
        _kill(process.pid)
        await process.wait()
        if cgroup is not None:
            await asyncio.to_thread(cgroup.remove)
    seconds = time.monotonic() - started
    log.info("skill %s: %s ran %.1f s, exit %s", skill, script, seconds, process.returncode)
    exit_code = None if timed_out else process.returncode
    return ScriptRun(
        skill, script, exit_code, stdout, stderr, seconds, confined, network, timed_out
    )


async def _cgroup(skill: str, limits: HostLimits, mode: str) -> HostCgroup | None:
    """A cgroup for the run's tree (memory, tasks, CPU share), or ``None`` where there is none."""
    support = await asyncio.to_thread(cgroup_support, mode)
    if not support.available:
        return None
    try:
        return await asyncio.to_thread(HostCgroup.create, support, f"skill-{skill}", limits)
    except OSError as exc:
        log.warning("skill %s: no cgroup for its script (%s); limits only", skill, exc)
        return None


async def _read(stream: asyncio.StreamReader, max_chars: int) -> str:
    """Everything the stream says, keeping the first ``max_chars`` characters (the rest
    is read and dropped, so a chatty script cannot fill the kernel's memory)."""
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(65536):
        room = max_chars * 4 - len(kept)
        kept += chunk[: max(room, 0)]
        dropped += max(len(chunk) - max(room, 0), 0)
    text = kept.decode("utf-8", errors="replace")
    if len(text) > max_chars or dropped:
        return f"{text[:max_chars]}\n[cut: the output is longer than {max_chars} characters]"
    return text


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
