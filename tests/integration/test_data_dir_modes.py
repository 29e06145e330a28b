"""Issue 28 item 11: the data directory is the user's alone.

It holds conversations, memories and the journal; with the default umask the
directory was 0755 and every database 0644, readable by any local account.
Now the directory is 0700 and every database file — the kernel's, an
extension's store, their ``-wal``/``-shm`` files — 0600, for a new install and,
mended at start, for an old one (ADR 0048). The tests run as root, which
reads anything: they check the modes themselves.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import ext_code
from support.harness import running_kernel, wait_for

STORE_EXT = ext_code(
    header="from core.extensions.sdk import SQLiteStore",
    body="""
    async def start(self):
        class Notes(SQLiteStore):
            SCHEMA = "CREATE TABLE IF NOT EXISTS notes (text TEXT)"
        self.store = Notes(self.ctx.data_dir / "notes.db")
        await self.store.open()
        await self.store.execute("INSERT INTO notes VALUES ('private')")
    async def stop(self):
        await self.store.close()
    """,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
async def test_new_databases_are_private_and_an_old_install_is_mended(
    make_ext, settings_file, tmp_path: Path, isolation
):
    data = tmp_path / "data"
    old_store = data / "extensions" / "gone" / "store.db"
    old_store.parent.mkdir(parents=True)
    for path in (data / "schedules.db", old_store, Path(f"{old_store}-wal")):
        path.write_bytes(b"")
        path.chmod(0o644)
    notes_txt = old_store.parent / "notes.txt"  # not a database: left as the user set it
    notes_txt.write_text("x")
    notes_txt.chmod(0o644)
    outside = tmp_path / "outside.db"  # a link's target is never changed
    outside.write_bytes(b"")
    outside.chmod(0o644)
    (data / "linked.db").symlink_to(outside)
    data.chmod(0o755)
    make_ext("notes", STORE_EXT, {"isolation": isolation})
    old_umask = os.umask(0o022)  # the usual umask, whatever the runner's
    try:
        async with running_kernel(settings_file()) as kernel:
            assert kernel.loader.records["notes"].status.value == "active"
            store = data / "extensions" / "notes" / "notes.db"
            await wait_for(lambda: Path(f"{store}-wal").exists(), 30)
            databases = [
                *(data / n for n in ("events.db", "sessions.db", "state.db", "schedules.db")),
                data / "events.db-wal",
                data / "events.db-shm",
                store,
                Path(f"{store}-wal"),
                old_store,
                Path(f"{old_store}-wal"),
            ]
            modes = {str(p.relative_to(data)): oct(mode(p)) for p in databases if p.exists()}
            assert mode(data) == 0o700
    finally:
        os.umask(old_umask)
    assert modes == {str(p.relative_to(data)): "0o600" for p in databases}
    assert mode(notes_txt) == 0o644 and mode(outside) == 0o644
