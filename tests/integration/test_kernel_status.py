"""``kernel_status`` and ``requeue_dead_letter`` (ADR 0024): the same answers in
process and across the plugin-host boundary, and only with the permissions."""

from __future__ import annotations

import asyncio
import time

import pytest

from conftest import ext_code
from core.extensions.contract import TurnContext
from core.kernel.commands.table import parse_command
from support.harness import running_kernel

OPERATOR = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command

        async def look(args, turn):
            try:
                status = await self.ctx.kernel_status()
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"
            mine = next(e for e in status.extensions if e.id == "operator")
            dead = [(d.event_id, d.subscriber, d.topic, d.error) for d in status.dead_letters]
            topics = {e.topic for e in status.recent_events}
            return repr((mine.status, mine.wired, status.model, dead, "demo.fail" in topics))

        async def requeue(args, turn):
            try:
                return str(await self.ctx.requeue_dead_letter(int(args)))
            except Exception as exc:
                return f"{type(exc).__name__}: {exc}"

        return [Command("look", "Status.", look), Command("requeue", "Requeue.", requeue)]
    """
)
TURN = TurnContext(channel_id="cli_channel", user_id="u1")


@pytest.fixture(params=["inprocess", "process"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def run(kernel, text: str) -> str:
    return await kernel.commands.run(parse_command(text), TURN)


async def test_status_shows_dead_letters_and_requeue_retries_them(mode, make_ext, settings_file):
    permissions = {"status": True, "control": True}
    make_ext("operator", OPERATOR, {"permissions": permissions, "isolation": mode})
    settings = settings_file(events={"max_attempts": 1}, isolation={"call_timeout_s": 10})
    async with running_kernel(settings) as kernel:
        healthy = False

        async def flaky(event):
            if not healthy:
                raise RuntimeError("disk full")

        kernel.bus.subscribe("demo.fail", flaky, "test/flaky")
        event_id = await kernel.bus.publish("demo.fail", "test", {})
        await _until_dead(kernel, 1)
        looked = await run(kernel, "/look")
        healthy = True
        requeued = await run(kernel, f"/requeue {event_id}")
        await _until_dead(kernel, 0)
        after = await run(kernel, "/look")
    assert looked == repr(
        (
            "active",
            True,
            kernel.status.model_description(),
            [(event_id, "test/flaky", "demo.fail", "RuntimeError: disk full")],
            True,
        )
    )
    assert requeued == "1"
    assert "[]" in after


async def test_without_the_permissions_both_are_refused(mode, make_ext, settings_file):
    make_ext("operator", OPERATOR, {"isolation": mode})
    async with running_kernel(settings_file(isolation={"call_timeout_s": 10})) as kernel:
        looked = await run(kernel, "/look")
        requeued = await run(kernel, "/requeue 1")
    assert "PermissionDeniedError" in looked and "permissions.status: true" in looked
    assert "PermissionDeniedError" in requeued and "permissions.control: true" in requeued


async def _until_dead(kernel, count: int) -> None:
    """Poll the journal until it holds ``count`` dead deliveries."""
    deadline = time.monotonic() + 10
    while (await kernel.bus.journal.counts()).get("dead", 0) != count:
        assert time.monotonic() < deadline, f"dead letters never reached {count}"
        await asyncio.sleep(0.02)
