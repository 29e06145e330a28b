"""Extension data lives in its own subtree; kernel names are reserved; kernel files
are never opened through a symbolic link (issue 11 item 2)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from conftest import ext_code
from core.config import load_settings
from core.extensions.loading.loader import Loader
from core.kernel import runner
from core.metrics import SNAPSHOT_FILE
from core.runtime import (
    JOURNAL_FILE,
    KERNEL_DATA_NAMES,
    RESERVED_IDS,
    RESTART_REQUEST_FILE,
    SymlinkRefusedError,
    extension_data_dir,
    migrate_extension_data,
    take_restart_request,
    write_restart_request,
)
from core.supervisor import logs, pidfile
from core.supervisor.logs import LOG_FILE, configure_logging
from core.supervisor.pidfile import PidFile
from support.harness import running_kernel

WRITER = ext_code(
    """
    async def initialize(self, ctx):
        self.ctx = ctx
        (ctx.data_dir / "seen.txt").write_text("hello")
    """
)


def test_every_kernel_file_name_is_reserved() -> None:
    names = {
        SNAPSHOT_FILE,
        RESTART_REQUEST_FILE,
        pidfile.PID_FILE,
        logs.LOG_FILE.parts[0],
    }
    assert names <= KERNEL_DATA_NAMES
    assert {"logs", "extensions", "events", "sessions", "schedules", "state", "grants"} <= (
        RESERVED_IDS
    )
    assert "restart_requested" in RESERVED_IDS and "supervisor" in RESERVED_IDS


@pytest.mark.parametrize("ext_id", ["logs", "events", "extensions", "restart_requested"])
def test_an_extension_named_after_a_kernel_file_is_a_manifest_error(
    make_ext, ext_root: Path, ext_id: str
) -> None:
    make_ext(ext_id, WRITER)
    loader = Loader(ext_root)
    loader.discover()
    record = loader.records[ext_id]
    assert record.status.value == "error"
    assert str(ext_root / ext_id / "manifest.yaml") in (record.error or "")
    assert f"id: {ext_id!r} is reserved for the kernel's own files" in (record.error or "")


async def test_hostile_logs_extension_is_refused_and_never_touches_the_log_dir(
    make_ext, settings_file, tmp_path: Path
) -> None:
    make_ext("logs", WRITER)
    make_ext("fine", WRITER)
    async with running_kernel(settings_file()) as kernel:
        assert kernel.loader.records["logs"].status.value == "error"
        assert kernel.loader.records["fine"].status.value == "active"
    data = tmp_path / "data"
    assert (data / "extensions" / "fine" / "seen.txt").read_text() == "hello"
    assert not (data / "logs").exists() and not (data / "fine").exists()


async def test_existing_data_moves_into_the_extension_subtree_once(
    make_ext, settings_file, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    (data / "fine").mkdir(parents=True)
    (data / "fine" / "old.txt").write_text("kept")
    make_ext("fine", WRITER)
    with caplog.at_level(logging.INFO, logger="core.runtime.datadir"):
        async with running_kernel(settings_file()):
            pass
    assert (data / "extensions" / "fine" / "old.txt").read_text() == "kept"
    assert (data / "extensions" / "fine" / "seen.txt").read_text() == "hello"
    assert not (data / "fine").exists()
    assert any("moved data of extension fine" in r.getMessage() for r in caplog.records)


def test_migration_never_overwrites_nor_follows_links(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "both").mkdir(parents=True)
    extension_data_dir(data, "both").mkdir(parents=True)
    (extension_data_dir(data, "both") / "new.txt").write_text("new")
    secret = tmp_path / "elsewhere"
    secret.mkdir()
    (secret / "private.txt").write_text("private")
    (data / "linked").symlink_to(secret)
    assert migrate_extension_data(data, ["both", "linked", "absent"]) == []
    assert (data / "both").is_dir()
    assert (extension_data_dir(data, "both") / "new.txt").read_text() == "new"
    assert not extension_data_dir(data, "linked").exists()
    assert (secret / "private.txt").read_text() == "private"


def test_a_symlinked_kernel_log_is_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    target = tmp_path / "bashrc"
    target.write_text("original\n")
    (data / LOG_FILE).symlink_to(target)
    with pytest.raises(SymlinkRefusedError, match="is a symbolic link"):
        configure_logging(data, "INFO")
    logging.getLogger("supervisor").warning("must not reach the target")
    assert target.read_text() == "original\n"


def test_a_symlinked_log_directory_is_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (data / "logs").symlink_to(elsewhere)
    with pytest.raises(SymlinkRefusedError, match="logs: it is a symbolic link"):
        configure_logging(data, "INFO")
    assert list(elsewhere.iterdir()) == []


def test_symlinked_pid_and_restart_files_are_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    (data / pidfile.PID_FILE).symlink_to(target)
    with pytest.raises(SymlinkRefusedError):
        PidFile(data).acquire()
    (data / RESTART_REQUEST_FILE).symlink_to(target)
    assert take_restart_request(data) is None  # the link is dropped unread
    assert not (data / RESTART_REQUEST_FILE).is_symlink()
    (data / RESTART_REQUEST_FILE).symlink_to(target)
    write_restart_request(data, "again")  # replaces the link, never writes through it
    assert target.read_text() == "untouched"
    assert not (data / RESTART_REQUEST_FILE).is_symlink()
    assert take_restart_request(data) == "again"


def test_a_linked_data_directory_itself_still_works(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    linked = tmp_path / "data"
    linked.symlink_to(real)
    close = configure_logging(linked, "INFO")
    try:
        logging.getLogger("supervisor").warning("through a linked data dir")
    finally:
        close()
    assert "through a linked data dir" in (real / LOG_FILE).read_text()
    assert os.path.isfile(real / LOG_FILE)


def test_settings_data_dir_is_the_root_of_the_subtree(settings_file) -> None:
    settings = load_settings(settings_file())
    assert extension_data_dir(settings.data_dir, "kv") == settings.data_dir / "extensions" / "kv"


def test_the_supervisor_refuses_to_start_on_a_symlinked_log(
    settings_file, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.supervisor import run_supervisor

    settings = load_settings(settings_file())
    (settings.data_dir / "logs").mkdir(parents=True)
    target = tmp_path / "bashrc"
    target.write_text("original\n")
    (settings.data_dir / LOG_FILE).symlink_to(target)
    code = run_supervisor(settings, None, kernel_argv=["/bin/false"])
    assert code == 1
    assert "kernel.log: it is a symbolic link" in capsys.readouterr().err
    assert target.read_text() == "original\n"
    assert (settings.data_dir / pidfile.PID_FILE).read_text() == ""  # released


def test_a_symlinked_journal_is_refused_before_it_is_opened(settings_file, tmp_path: Path) -> None:
    settings = load_settings(settings_file())
    settings.data_dir.mkdir(parents=True)
    target = tmp_path / "elsewhere.db"
    (settings.data_dir / JOURNAL_FILE).symlink_to(target)
    with pytest.raises(SymlinkRefusedError, match=r"events\.db: it is a symbolic link"):
        runner.Kernel(settings)
    assert not target.exists()
