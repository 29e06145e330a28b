"""Subscriptions per extension are capped, and journal rows of subscriptions an
extension no longer holds are removed (issue 11 item 13)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from test_isolation_hostile import isolated, settings

from conftest import ext_code
from core.events import EventBus
from core.events.sqlite_journal import SQLiteJournal
from support.harness import running_kernel, wait_for

FLOOD = ext_code(
    """
    async def initialize(self, ctx):
        self.ctx = ctx
        self.refused = []
        for i in range(int(ctx.get_config("n"))):
            async def handler(event):
                pass
            handler.__qualname__ = f"h{i}"
            try:
                ctx.subscribe_event("flood.tick", handler)
            except Exception as exc:
                self.refused.append(str(exc))
    """
)

RAW_FLOOD = ext_code(
    """
    async def initialize(self, ctx):
        self.ctx = ctx
        for i in range(int(ctx.get_config("n"))):
            params = {"topic": "flood.tick", "handler": 1, "name": f"h{i}"}
            ctx._peer.notify_nowait("ctx.subscribe", params)
    """
)


def _rows(tmp_path: Path, ext_id: str) -> int:
    with sqlite3.connect(tmp_path / "data" / "events.db") as conn:
        (n,) = conn.execute(
            "SELECT count(*) FROM subscribers WHERE id LIKE ?", (f"{ext_id}/%",)
        ).fetchone()
    return int(n)


async def test_500_subscriptions_are_capped_and_stale_rows_go_after_a_restart(
    make_ext, settings_file, tmp_path: Path
) -> None:
    path = settings_file(loader={"max_subscriptions": 20})
    make_ext("flood", FLOOD, {"config": {"n": 500}})
    async with running_kernel(path) as kernel:
        ext = kernel.loader.instance("flood")
        assert len(ext.refused) == 480
        assert "subscribe to 'flood.tick': it holds 20 subscriptions already" in ext.refused[0]
        assert kernel.loader.records["flood"].status.value == "active"
    assert _rows(tmp_path, "flood") == 20

    make_ext("flood", FLOOD, {"config": {"n": 3}})
    async with running_kernel(path) as kernel:
        assert kernel.loader.instance("flood").refused == []
    assert _rows(tmp_path, "flood") == 3


async def test_raw_subscribes_from_a_hostile_host_are_capped_and_summarised(
    make_ext, settings_file, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    make_ext("flood", RAW_FLOOD, isolated({"config": {"n": 500}}))
    async with running_kernel(settings(settings_file)) as kernel:
        assert kernel.loader.records["flood"].status.value == "active"
        assert len(kernel.loader.records["flood"].context.subscriptions) == 64
    assert _rows(tmp_path, "flood") == 64
    refusals = [r for r in caplog.records if "subscription to flood.tick refused" in r.getMessage()]
    assert 1 <= len(refusals) <= 20
    summaries = [
        r.getMessage() for r in caplog.records if "refused subscriptions" in r.getMessage()
    ]
    assert summaries and all("suppressed" in m for m in summaries)
    assert sum(int(m.split("… ")[1].split()[0].replace(",", "")) for m in summaries) == (
        436 - len(refusals)
    )


async def test_unsubscribe_stops_delivery_and_keeps_the_cursor(tmp_path: Path) -> None:
    bus = EventBus(SQLiteJournal(tmp_path / "events.db"), poll_interval_s=0.05)
    got: list[int] = []

    async def handler(event) -> None:  # type: ignore[no-untyped-def]
        got.append(event.payload["n"])

    bus.subscribe("t.x", handler, "ext/t.x/handler")
    await bus.start()
    try:
        await bus.publish("t.x", "test", {"n": 1})
        await wait_for(lambda: got == [1])
        assert bus.unsubscribe("ext/t.x/handler") is True
        assert bus.unsubscribe("ext/t.x/handler") is False
        await bus.publish("t.x", "test", {"n": 2})
        bus.subscribe("t.x", handler, "ext/t.x/handler")
        await wait_for(lambda: got == [1, 2])  # caught up from its cursor
        bus.unsubscribe("ext/t.x/handler")
        assert await bus.forget_subscribers("ext/") == ["ext/t.x/handler"]
        assert await bus.forget_subscribers("ext/") == []
    finally:
        await bus.stop()
