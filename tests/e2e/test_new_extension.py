"""``main.py new-extension``: the skeleton's own test passes, and it loads ``active``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import PROJECT_ROOT


def hearth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "main.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


# Each kind of skeleton, by the flags that make it: the capabilities it declares.
# Isolated unless --inprocess (ADR 0086); --isolated says the default aloud.
KINDS = {
    "plain": ((), ["ToolProvider"]),
    "tool": (("--tool",), ["ToolProvider"]),
    "chan": (("--channel",), ["ChannelProvider"]),
    "both": (("--tool", "--channel"), ["ToolProvider", "ChannelProvider"]),
    "iso": (("--isolated",), ["ToolProvider"]),
    "inproc": (("--inprocess",), ["ToolProvider"]),
    "inprocboth": (("--tool", "--channel", "--inprocess"), ["ToolProvider", "ChannelProvider"]),
}


def test_every_kind_of_skeleton_passes_its_test_and_loads_active(settings_file, ext_root, tmp_path):
    """All seven kinds side by side in one extensions folder: one pytest run, one
    lint and one ``main.py extensions`` report judge them all (a report or test
    failure names the skeleton, ``my-<kind>``)."""
    settings = settings_file()
    for kind, (flags, _) in KINDS.items():
        made = hearth("new-extension", f"my-{kind}", *flags, "--settings", str(settings))
        assert made.returncode == 0, (kind, made.stderr)
        ext_dir = ext_root / f"my-{kind}"
        assert (ext_dir / "manifest.yaml").is_file() and (ext_dir / "tests").is_dir()
        isolated = "isolation: process" in (ext_dir / "manifest.yaml").read_text()
        assert isolated == ("--inprocess" not in flags), kind

    tested = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-c",
            str(PROJECT_ROOT / "pyproject.toml"),
            "--rootdir",
            str(PROJECT_ROOT),
            *(str(ext_root / f"my-{kind}") for kind in KINDS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    expected = sum(len(capabilities) for _, capabilities in KINDS.values())
    assert tested.returncode == 0 and f"{expected} passed" in tested.stdout, tested.stdout

    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", str(ext_root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=PROJECT_ROOT,
    )
    assert lint.returncode == 0, lint.stdout

    report = hearth("extensions", "--json", "--settings", str(settings))
    entries = {e["id"]: e for e in json.loads(report.stdout)}
    for kind, (_, capabilities) in KINDS.items():
        entry = entries[f"my-{kind}"]
        assert entry["status"] == "active", entry
        assert entry["capabilities"] == capabilities, entry
        tools = [f"my_{kind}_hello"] if "ToolProvider" in capabilities else []
        assert entry["tools"] == tools, entry


def test_the_project_collects_extension_tests():
    """``make test`` runs pytest with no arguments: testpaths must hold the extensions."""
    import tomllib

    config = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    assert "sandbox/extensions" in config["tool"]["pytest"]["ini_options"]["testpaths"]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("9lives", "not a valid extension id"),
        ("has space", "not a valid extension id"),
        ("x" * 65, "not a valid extension id"),
        ("events", "reserved"),
        ("Kernel", "reserved"),
    ],
)
def test_bad_names_are_refused_and_nothing_is_written(name, reason, settings_file, ext_root):
    made = hearth("new-extension", name, "--settings", str(settings_file()))
    assert made.returncode == 2 and reason in made.stderr
    assert not any(ext_root.iterdir())


def test_an_existing_directory_is_never_touched(settings_file, ext_root):
    (ext_root / "mine").mkdir()
    (ext_root / "mine" / "main.py").write_text("# my own work\n")
    made = hearth("new-extension", "mine", "--settings", str(settings_file()))
    assert made.returncode == 2 and "already exists" in made.stderr
    assert (ext_root / "mine" / "main.py").read_text() == "# my own work\n"
