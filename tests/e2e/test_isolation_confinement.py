"""Confinement of plugin hosts (bubblewrap) and the loud fallback without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_isolation_hostile import command, isolated, needs_bwrap, settings

from conftest import ext_code
from support.harness import running_kernel, wait_for

NETWORK = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import socket

        async def connect(args, turn):
            try:
                socket.create_connection(("127.0.0.1", int(args)), timeout=2).close()
            except OSError as exc:
                return type(exc).__name__
            return "connected"

        return [Command("connect", "open a TCP connection", connect)]
    """,
)


@needs_bwrap
async def test_network_is_cut_unless_the_manifest_allows_it(make_ext, settings_file):
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    make_ext("offline", NETWORK, isolated({"permissions": {"network": False}}))
    online = NETWORK.replace('"connect"', '"connect_online"')
    make_ext("online", online, isolated({"permissions": {"network": True}}))
    try:
        async with running_kernel(settings(settings_file)) as kernel:
            assert await command(kernel, f"/connect {port}") in (
                "ConnectionRefusedError",
                "OSError",
            )
            assert await command(kernel, f"/connect_online {port}") == "connected"
    finally:
        server.close()


async def test_without_confinement_a_network_restriction_is_refused_loudly(
    make_ext, settings_file, caplog
):
    make_ext("offline", NETWORK, isolated({"permissions": {"network": False}}))
    make_ext("online", NETWORK, isolated({"permissions": {"network": True}}))
    async with running_kernel(settings(settings_file, confinement="none")) as kernel:
        record = kernel.loader.records["offline"]
        assert record.status.value == "error"
        assert "permissions.network: false cannot be enforced without confinement" in (
            record.error or ""
        )
        assert kernel.loader.records["online"].status.value == "active"
    assert any("PLUGIN HOSTS ARE NOT CONFINED" in r.message for r in caplog.records)


ESCAPER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import os, subprocess, sys

        async def escape(args, turn):
            beat = self.ctx.data_dir / "beat"
            code = (
                "import sys, time\\n"
                "while True:\\n"
                "    open(sys.argv[1], 'w').write(str(time.time()))\\n"
                "    time.sleep(0.05)\\n"
            )
            subprocess.Popen([sys.executable, "-c", code, str(beat)], start_new_session=True)
            return "escaped"

        async def exit_now(args, turn):
            os._exit(0)

        return [Command("escape", "leave a process behind", escape),
                Command("exit_now", "exit", exit_now)]
    """,
)


@needs_bwrap
async def test_processes_that_leave_the_group_die_with_their_host(
    make_ext, settings_file, tmp_path: Path
):
    make_ext("escaper", ESCAPER, isolated())
    beat = tmp_path / "data" / "extensions" / "escaper" / "beat"
    async with running_kernel(settings(settings_file)) as kernel:
        assert await command(kernel, "/escape") == "escaped"
        await wait_for(beat.exists, 10)
        await command(kernel, "/exit_now")
        await wait_for(lambda: kernel.loader.records["escaper"].error is not None, 10)
        await asyncio.sleep(0.2)  # let a write already under way land
        stamp = beat.stat().st_mtime
        await asyncio.sleep(0.5)
        assert beat.stat().st_mtime == stamp, "the escaped process is still running"
