"""Issue 41 item 6 (ADR 0073): what a grant pins is exactly what runs.

The attacks of the third red team, each against a real kernel: bytecode
planted beside a granted source with a header that matches it (in-process and
isolated), a linked directory whose content lies outside the extension and
changes after the grant, and a file swapped after the digest was taken but
before the import — at discovery, on ``/reload`` and under ``dev.watch``. The
extension writes the value its code holds into its data dir when it
initializes, so the test reads which code ran.
"""

from __future__ import annotations

import importlib.util
import logging
import marshal
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ext_code, grant_all
from core.extensions.loading.code_digest import code_digest
from core.extensions.loading.loader import Loader
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

MAIN = ext_code(
    header="""
    from .helper import VALUE
    """,
    body="""
    async def initialize(self, context):
        self.ctx = context
        (context.data_dir / "ran.txt").write_text(VALUE)
    """,
)
# an isolated extension that asks nothing needs no grant: this one reads a secret
NEEDS_GRANT = {"secrets": ["PIN_TOKEN"]}


def helper(value: str) -> str:
    return f"VALUE = {value!r}\n"


def ran(ext_dir: Path) -> str | None:
    """The value the extension's code wrote when it initialized (None: it did not)."""
    path = ext_dir.parent.parent / "data" / "extensions" / ext_dir.name / "ran.txt"
    return path.read_text() if path.exists() else None


def plant_bytecode(source: Path, evil: str) -> Path:
    """``__pycache__/<name>.cpython-311.pyc`` compiled from ``evil``, whose header
    carries ``source``'s mtime and size: Python takes it for the source's cache."""
    info = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
    header += (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    code = compile(evil, str(source), "exec")
    cache = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(header + marshal.dumps(code))
    return cache


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def pinned(make_ext: Any, mode: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A granted extension ``pinned`` whose ``helper.py`` holds ``granted``."""
    monkeypatch.setenv("PIN_TOKEN", "t0ken")
    manifest = {"isolation": mode, **NEEDS_GRANT}
    return make_ext("pinned", MAIN, manifest, files={"helper.py": helper("granted")})


def kernel_settings(settings_file: Any, **sections: Any) -> Path:
    return settings_file(isolation={"call_timeout_s": 20}, **sections)


async def test_planted_bytecode_with_a_matching_header_never_runs(pinned, settings_file):
    granted = code_digest(pinned)
    cache = plant_bytecode(pinned / "helper.py", helper("planted"))
    assert code_digest(pinned) == granted  # bytecode is not code the grant covers
    async with running_kernel(kernel_settings(settings_file)) as kernel:
        assert kernel.loader.records["pinned"].live
        assert ran(pinned) == "granted"
    assert cache.exists()  # left alone, just never read


async def test_a_file_swapped_after_discovery_hashed_it_never_runs(
    pinned, settings_file, monkeypatch
):
    discover = Loader.discover

    def discover_then_swap(self: Loader) -> None:
        discover(self)  # the digest is taken and checked against the grant here
        (pinned / "helper.py").write_text(helper("swapped"))

    monkeypatch.setattr(Loader, "discover", discover_then_swap)
    async with running_kernel(kernel_settings(settings_file)) as kernel:
        assert kernel.loader.records["pinned"].live
        assert ran(pinned) == "granted"


def swap_after_the_grant_check(monkeypatch: pytest.MonkeyPatch, ext_dir: Path) -> list[str]:
    """Write ``helper.py`` anew once a reload found the code on disk granted, before
    it imports it (the hook point between hashing and importing)."""
    refusal_for = Loader.refusal_for
    swapped: list[str] = []

    def check_then_swap(self: Loader, *args: Any) -> str | None:
        refusal = refusal_for(self, *args)
        if refusal is None and not swapped:
            (ext_dir / "helper.py").write_text(helper("swapped"))
            swapped.append("helper.py")
        return refusal

    monkeypatch.setattr(Loader, "refusal_for", check_then_swap)
    return swapped


def new_version(ext_dir: Path, value: str) -> None:
    """New code, granted as its developer would (a grant binds code, ADR 0044)."""
    (ext_dir / "helper.py").write_text(helper(value))
    grant_all(ext_dir.parent, ext_dir.parent.parent / "data", only=ext_dir.name)


async def test_a_file_swapped_between_hashing_and_import_on_reload_never_runs(
    pinned, make_ext, settings_file, monkeypatch
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(kernel_settings(settings_file)) as kernel:
        assert ran(pinned) == "granted"
        new_version(pinned, "v2")
        swapped = swap_after_the_grant_check(monkeypatch, pinned)
        assert (await kernel.reloads.reload("pinned")).startswith("Reloaded pinned")
        assert swapped == ["helper.py"]
        assert ran(pinned) == "v2"  # what was hashed and granted, not what is on disk now


@pytest.mark.parametrize("mode", ["inprocess"])
async def test_a_file_swapped_between_hashing_and_import_under_dev_watch_never_runs(
    pinned, settings_file, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="core.kernel.reload.reloader")
    path = kernel_settings(settings_file, dev={"watch": True, "watch_debounce_ms": 50})
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["pinned"]
        old = record.instance
        swapped = swap_after_the_grant_check(monkeypatch, pinned)

        def reloaded() -> bool:
            if record.instance is not old and record.live:
                return True
            if not swapped:  # the watcher starts with the kernel's tasks: write until seen
                new_version(pinned, "v2")
            return False

        await wait_for(reloaded, timeout=30)
        assert swapped == ["helper.py"] and ran(pinned) == "v2"
        # the swapped file is a change too: the watcher's reload of it is refused
        refused = "dev.watch: Reload of pinned failed: its code changed since the grant"
        await wait_for(lambda: any(refused in r.getMessage() for r in caplog.records), 30)
        assert record.live and ran(pinned) == "v2"


@pytest.mark.parametrize("mode", ["inprocess"])
async def test_a_linked_directory_leading_outside_is_refused_naming_the_link(
    pinned, make_ext, settings_file, tmp_path
):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "impl.py").write_text(helper("granted"))
    (pinned / "helper.py").write_text("from .lib.impl import VALUE\n")
    (pinned / "lib").symlink_to(outside, target_is_directory=True)
    path = kernel_settings(settings_file)
    async with running_kernel(path) as kernel:
        reply = await kernel.commands.run(*grant_command("pinned"))
    (outside / "impl.py").write_text(helper("changed outside"))  # after the grant
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["pinned"]
        assert ran(pinned) is None
        assert record.status == "error"
        assert f"{pinned / 'lib'}" in (record.error or "") and "outside" in (record.error or "")
    assert "cannot be granted" in (reply or "") and str(pinned / "lib") in (reply or "")


def grant_command(ext_id: str) -> tuple[Any, Any]:
    from core.extensions.contract import TurnContext
    from core.kernel.commands.table import parse_command

    turn = TurnContext(channel_id="capture", user_id="u1", session_id="s1")
    return parse_command(f"/grant {ext_id} yes"), turn


def test_links_inside_are_followed_as_their_content_and_loops_are_refused(tmp_path):
    """Content hashed is content imported: a link inside the extension counts (and is
    copied) as what it leads to; the snapshot holds no bytecode."""
    from core.extensions.loading.code_digest import CodeLinkError, read_code
    from core.extensions.loading.code_snapshot import CodeSnapshots

    linked, copied = tmp_path / "linked", tmp_path / "copied"
    for ext in (linked, copied):
        (ext / "impl").mkdir(parents=True)
        (ext / "impl" / "util.py").write_text(helper("inside"))
        (ext / "__pycache__").mkdir()
        (ext / "__pycache__" / "util.cpython-311.pyc").write_bytes(b"\0planted")
    (linked / "lib").symlink_to("impl", target_is_directory=True)
    (copied / "lib").mkdir()
    (copied / "lib" / "util.py").write_text(helper("inside"))
    code = read_code(linked)
    assert code.digest == read_code(copied).digest
    snapshot = CodeSnapshots(tmp_path / "snapshots").pin(code, "linked")
    written = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*"))
    assert written == ["impl", "impl/util.py", "lib", "lib/util.py"]
    assert not (snapshot / "lib").is_symlink()
    (tmp_path / "elsewhere").mkdir()
    (linked / "data").symlink_to(tmp_path / "elsewhere")  # data, not code: left out
    assert read_code(linked).digest == code.digest
    (linked / "impl" / "loop").symlink_to("..", target_is_directory=True)
    with pytest.raises(CodeLinkError, match="one of its own parents"):
        read_code(linked)


async def test_bundled_code_granted_by_the_project_runs_as_shipped(
    ext_root, make_ext, settings_file, tmp_path
):
    """The project's grant pins the bundled code too: kv's planted bytecode never runs."""
    from support.bundled import copy_bundled

    copy_bundled(ext_root, "kv")
    marker = tmp_path / "planted-ran"
    main = ext_root / "kv" / "main.py"
    plant_bytecode(main, main.read_text() + f"\nopen({str(marker)!r}, 'w').close()\n")
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    async with running_kernel(kernel_settings(settings_file)) as kernel:
        assert kernel.loader.records["kv"].live  # granted by bundled_grants.yaml
        assert "kv_get" in kernel.loader.records["kv"].tool_names
    assert not marker.exists()


def test_a_snapshot_is_written_once_per_version_and_old_ones_are_pruned(tmp_path):
    import os

    from core.extensions.loading.code_digest import read_code
    from core.extensions.loading.code_snapshot import KEEP, CodeSnapshots

    ext = tmp_path / "ext"
    ext.mkdir()
    snapshots = CodeSnapshots(tmp_path / "snapshots")
    pinned = []
    for version in range(KEEP + 2):
        (ext / "main.py").write_text(helper(f"v{version}"))
        pinned.append(snapshots.pin(read_code(ext), "ext"))
        os.utime(pinned[-1], (version, version))  # distinct ages, oldest first
    again = snapshots.pin(read_code(ext), "ext")
    assert again == pinned[-1] and (again / "main.py").read_text() == helper(f"v{KEEP + 1}")
    kept = sorted((tmp_path / "snapshots" / "ext").iterdir())
    assert kept == sorted(pinned[-KEEP:])
