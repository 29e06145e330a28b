"""A skill's script runs confined like an isolated extension (bubblewrap): its
output comes back, the skill's folder is read-only, a scratch directory is
writable and gone afterwards, there is no network unless ``skills.network``
names the skill, a loop is killed at the time limit, a flood of output is cut,
and a script outside ``scripts/`` (``..``, a symlink out) is never run."""

from __future__ import annotations

import os
import time

import pytest

from core.extensions.isolation.host.limits import HostLimits
from core.extensions.isolation.kernel.confinement import probe
from core.extensions.isolation.kernel.watchdog import cgroup_support
from core.skills import (
    ScriptLimits,
    SkillFileError,
    SkillRoot,
    SkillScriptError,
    discover,
    run_script,
)
from support.skills_kit import public_layout, write_skill

pytestmark = pytest.mark.skipif(
    not probe().available, reason=f"bubblewrap is needed: {probe().detail}"
)
CGROUPS = cgroup_support("auto")

LIMITS = ScriptLimits(timeout_s=20.0)
HOSTILE = {
    "scripts/loop.py": "while True:\n    pass\n",
    "scripts/sleep.sh": "sleep 600\n",
    "scripts/net.py": """
        import socket
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=3)
            print("connected")
        except OSError as exc:
            print(f"refused: {exc}")
        try:
            socket.getaddrinfo("example.org", 80)
            print("resolved")
        except OSError as exc:
            print(f"no dns: {exc}")
    """,
    "scripts/write.py": """
        import os, pathlib, sys
        pathlib.Path("result.txt").write_text("in scratch")
        print("scratch:", os.getcwd(), pathlib.Path("result.txt").read_text())
        try:
            pathlib.Path(sys.argv[1], "planted.txt").write_text("x")
            print("planted")
        except OSError as exc:
            print(f"read-only: {exc.strerror}")
    """,
    "scripts/flood.py": "import sys\nsys.stdout.write('y' * 5_000_000)\n",
    "scripts/fail.py": "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n",
    "scripts/forks.py": """
        import os
        started = 0
        for _ in range(400):
            try:
                pid = os.fork()
            except OSError as exc:
                print(f"fork refused: {exc.strerror}")
                break
            if pid == 0:  # a child sleeps in the background, as `sleep 30 &` would
                os.execv("/bin/sleep", ["sleep", "30"])
            started += 1
        print(f"started {started}")
    """,
    "scripts/hog.py": """
        try:
            block = bytearray(2 * 1024 * 1024 * 1024)
            print("allocated")
        except MemoryError:
            print("memory refused")
    """,
}


@pytest.fixture
def skills(tmp_path):
    public_layout(tmp_path / "skills")
    write_skill(tmp_path / "skills", "hostile", files=HOSTILE)
    return discover([SkillRoot(tmp_path / "skills")])


async def run(skills, tmp_path, name, script, args=(), *, limits=LIMITS, network=False):
    return await run_script(
        skills.get(name),
        script,
        list(args),
        limits=limits,
        network=network,
        scratch_root=tmp_path / "scratch",
    )


async def test_a_python_script_runs_with_its_arguments_and_returns_its_output(skills, tmp_path):
    result = await run(skills, tmp_path, "word-count", "scripts/count.py", ["one two", "three"])
    assert result.exit_code == 0 and result.stdout.strip() == "3 words"
    assert result.confined and not result.network
    assert "exit code 0" in result.text() and "3 words" in result.text()
    bare = await run(skills, tmp_path, "word-count", "count.py", ["a"])  # scripts/ implied
    assert bare.stdout.strip() == "1 words"


async def test_a_failing_script_reports_its_exit_code_and_stderr(skills, tmp_path):
    result = await run(skills, tmp_path, "hostile", "scripts/fail.py")
    assert result.exit_code == 3 and "bad input" in result.stderr
    assert "stderr:\nbad input" in result.text()


async def test_the_skill_folder_is_read_only_and_the_scratch_dir_is_gone_after(skills, tmp_path):
    folder = skills.get("hostile").folder
    result = await run(skills, tmp_path, "hostile", "scripts/write.py", [str(folder)])
    assert "scratch:" in result.stdout and "in scratch" in result.stdout
    assert "read-only: Read-only file system" in result.stdout
    assert not (folder / "planted.txt").exists()
    assert os.listdir(tmp_path / "scratch") == []


async def test_a_script_has_no_network_unless_the_skill_is_granted_it(skills, tmp_path):
    result = await run(skills, tmp_path, "hostile", "scripts/net.py")
    assert "refused:" in result.stdout and "connected" not in result.stdout
    assert "no dns:" in result.stdout
    granted = await run(skills, tmp_path, "hostile", "scripts/net.py", network=True)
    assert granted.network and "network allowed" in granted.text()


@pytest.mark.parametrize("script", ["scripts/loop.py", "scripts/sleep.sh"])
async def test_a_script_that_never_ends_is_killed_at_the_time_limit(skills, tmp_path, script):
    started = time.monotonic()
    result = await run(skills, tmp_path, "hostile", script, limits=ScriptLimits(timeout_s=1.5))
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 15  # generous: a loaded 2-core machine
    assert "over the time limit (skills.timeout_s)" in result.text()


async def test_a_flood_of_output_is_cut_and_says_so(skills, tmp_path):
    limits = ScriptLimits(timeout_s=20.0, output_max_chars=1000)
    result = await run(skills, tmp_path, "hostile", "scripts/flood.py", limits=limits)
    assert result.exit_code == 0
    assert result.stdout.startswith("y" * 1000) and "[cut: the output is longer" in result.stdout
    assert len(result.stdout) < 1100


async def test_memory_beyond_the_limit_is_refused(skills, tmp_path):
    result = await run(skills, tmp_path, "hostile", "scripts/hog.py")
    assert "allocated" not in result.stdout


@pytest.mark.skipif(not CGROUPS.available, reason=f"no usable cgroups: {CGROUPS.detail}")
async def test_a_scripts_forks_fail_at_the_cgroups_task_limit(skills, tmp_path):
    # the script and every process it starts are born inside the run's cgroup (v1 or
    # v2): moving bwrap there after it has cloned the script left them all outside
    result = await run(skills, tmp_path, "hostile", "scripts/forks.py")
    assert result.exit_code == 0, result.text()
    started = int(result.stdout.split("started ")[1])
    assert started < HostLimits().pids_max, result.stdout  # 400 ran before
    assert "fork refused: Resource temporarily unavailable" in result.stdout


async def test_only_files_of_the_scripts_folder_run(skills, tmp_path):
    skill = skills.get("hostile")
    outside = tmp_path / "outside.py"
    outside.write_text("print('escaped')")
    os.symlink(outside, skill.folder / "scripts" / "link.py")
    for script, error in [
        ("../SKILL.md", "'..' is not allowed"),
        ("scripts/../../outside.py", "'..' is not allowed"),
        (str(outside), "must be relative"),
        ("scripts/link.py", "leads outside the skill's scripts/ folder"),
        ("references/fields.md", "no such file"),
    ]:
        with pytest.raises(SkillFileError, match=error):
            await run(skills, tmp_path, "hostile", script)
    with pytest.raises(SkillScriptError, match="not a .py or .sh file"):
        (skill.folder / "scripts" / "data.txt").write_text("x")
        await run(skills, tmp_path, "hostile", "scripts/data.txt")


async def test_without_confinement_a_script_without_network_is_refused(skills, tmp_path):
    limits = ScriptLimits(confinement="none")
    with pytest.raises(SkillScriptError, match="cannot be confined here"):
        await run(skills, tmp_path, "word-count", "scripts/count.py", limits=limits)
    assert os.listdir(tmp_path / "scratch") == []  # its scratch dir was removed too
