"""A hostile ``StatusReporter`` cannot flood or stall ``/status``.

Ten lines at most, each cut to a line's length, and a reporter that never
answers (or whose answer is too big to carry) costs one "status unavailable"
line, in-process and isolated.
"""

from __future__ import annotations

import time

import pytest
from test_isolation_hostile import command, settings

from conftest import ext_code
from support.harness import running_kernel

FLOODER = ext_code(
    body="""
    async def status_lines(self):
        return ["x" * 1_000_000] * 500
    """
)
STALLER = ext_code(
    body="""
    async def status_lines(self):
        import asyncio
        await asyncio.sleep(3600)
        return ["never"]
    """
)


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_status_stays_short_and_answers(mode, make_ext, settings_file):
    make_ext("flooder", FLOODER, {"isolation": mode})
    make_ext("staller", STALLER, {"isolation": mode})
    async with running_kernel(settings(settings_file)) as kernel:
        started = time.monotonic()
        reply = await command(kernel, "/status")
        assert time.monotonic() - started < 20  # the 3 s deadline, generously
    flooder = [line for line in reply.splitlines() if line.strip().startswith("flooder:")]
    # in-process: its first ten lines, cut; isolated, the 500 MB answer is more than
    # the plugin host may hold, which costs it one "status unavailable" line
    assert 1 <= len(flooder) <= 10, flooder
    assert all(len(line) <= 260 for line in flooder)  # 200 characters plus the label
    assert "staller: status unavailable: no answer within" in reply
    assert "never" not in reply
