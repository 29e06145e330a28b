"""Nodes sharing PostgreSQL with different extension sets (issue 34, ADR 0039): during
a rolling upgrade node A has the new extension ``notes`` and node B not yet. B's start
must not unregister it — its state and its event subscription live in the database A
uses. Once no node has listed it for the grace period (A gone), it is unregistered."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import asyncpg
import yaml

from conftest import TEST_ISOLATION, ext_code, grant_all
from core.config import load_settings
from support.harness import running_kernel

NOTES = ext_code(
    body="""
    async def initialize(self, context):
        self.ctx = context

        async def on_note(event):
            pass

        context.subscribe_event("notes.added", on_note)

    async def start(self):
        await self.ctx.set_state("last", "kept", scope="extension")
    """
)
PLAIN = ext_code()


def _node(tmp_path: Path, name: str, dsn: str, extensions: dict[str, str]) -> Path:
    """A node's own extensions directory, data directory and settings file."""
    root = tmp_path / name
    ext_root = root / "extensions"
    for ext_id, code in extensions.items():
        ext_dir = ext_root / ext_id
        ext_dir.mkdir(parents=True)
        manifest = {"id": ext_id, "name": ext_id, "version": "1.0.0", "entrypoint": "main:Ext"}
        if ext_id == "notes":
            manifest["permissions"] = {"subscribe": ["notes.*"]}
        (ext_dir / "manifest.yaml").write_text(yaml.safe_dump(manifest))
        (ext_dir / "main.py").write_text(code)
    data_dir = root / "data"
    data_dir.mkdir(parents=True)
    grant_all(ext_root, data_dir)
    settings = {
        "paths": {"extensions": str(ext_root), "data": str(data_dir)},
        "models": {"default": None},
        "logging": {"level": "INFO"},
        "policy": {"profile": "full_auto"},
        "isolation": dict(TEST_ISOLATION),
        "storage": {"backend": "postgres", "postgres_dsn": dsn},
    }
    path = root / "settings.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


async def _what_notes_holds(dsn: str) -> tuple[bool, int, int]:
    """(registered, state keys, event subscriptions) of ``notes`` in the shared database."""
    conn = await asyncpg.connect(dsn)
    try:
        registered = await conn.fetchval(
            "SELECT count(*) FROM hearth_registered_extensions WHERE ext_id = 'notes'"
        )
        keys = await conn.fetchval(
            "SELECT count(*) FROM hearth_extension_state WHERE ext_id = 'notes'"
        )
        subscriptions = await conn.fetchval(
            "SELECT count(*) FROM journal_subscribers WHERE starts_with(id, 'notes/')"
        )
        return bool(registered), int(keys), int(subscriptions)
    finally:
        await conn.close()


async def test_a_node_without_an_extension_does_not_unregister_it_for_the_others(
    tmp_path, postgres_dsn, caplog
):
    caplog.set_level(logging.INFO, "core.kernel.reload.registrations")
    node_a = _node(tmp_path, "a", postgres_dsn, {"notes": NOTES, "plain": PLAIN})
    node_b = _node(tmp_path, "b", postgres_dsn, {"plain": PLAIN})
    async with running_kernel(node_a):
        pass
    assert await _what_notes_holds(postgres_dsn) == (True, 1, 1)

    async with running_kernel(node_b):  # the upgrade has not reached B yet
        pass
    assert await _what_notes_holds(postgres_dsn) == (True, 1, 1)
    assert "extension notes is no longer installed" not in caplog.text
    assert "extension notes is not installed on this node but is on another" in caplog.text

    # A is gone (its list not stamped for longer than the grace period): B's next
    # start unregisters notes, which no node runs any more
    grace_s = load_settings(node_b).events.retention_days * 86400
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute(
            "UPDATE hearth_node_extensions SET seen_at = $1", time.time() - grace_s - 60
        )
    finally:
        await conn.close()
    async with running_kernel(node_b):
        pass
    assert await _what_notes_holds(postgres_dsn) == (False, 0, 0)
    assert "extension notes is no longer installed: unregistered" in caplog.text
