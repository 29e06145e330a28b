"""Issue 11 item 7: no publisher may journal a payload over ``events.max_payload_bytes``.

Ten 10 MB emits made ``events.db`` 110 MB. The cap sits in the bus, so it
holds for every publisher: the kernel, an in-process extension, an isolated one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_isolation_hostile import command, settings

from conftest import ext_code
from core.events import EventBus, PayloadError, PayloadTooLargeError, SQLiteJournal
from support.harness import running_kernel

MB = 1024 * 1024


async def test_the_bus_refuses_a_payload_over_the_cap_naming_topic_and_size(tmp_path: Path):
    bus = EventBus(SQLiteJournal(tmp_path / "events.db"), max_payload_bytes=1024)
    await bus.start()
    try:
        await bus.publish("news.small", "test", {"text": "x" * 900})
        with pytest.raises(PayloadTooLargeError) as caught:
            await bus.publish("news.big", "test", {"text": "x" * 2000})
        assert str(caught.value) == (
            "payload for topic 'news.big' is too large: 2011 bytes of JSON, over the limit "
            "of 1024 (events.max_payload_bytes)"
        )
        assert isinstance(caught.value, PayloadError) and caught.value.size == 2011
        # the size is counted in UTF-8 bytes, not characters
        with pytest.raises(PayloadTooLargeError, match="1211 bytes"):
            await bus.publish("news.euro", "test", {"text": "€" * 400})
        assert (await bus.stats()).get("events", 0) <= 1
    finally:
        await bus.stop()


EMITTER = ext_code(
    body="""
    def get_commands(self):
        from core.extensions.contract import Command
        import json

        async def flood(args, turn):
            outcomes = []
            for i in range(10):
                try:
                    await self.ctx.emit("emitter.blob", {"blob": "x" * (10 * 1024 * 1024)})
                    outcomes.append("stored")
                except Exception as exc:
                    outcomes.append(f"{type(exc).__name__}: {exc}")
            await self.ctx.emit("emitter.blob", {"blob": "small"})
            return json.dumps(outcomes)

        return [Command("flood", "ten 10 MB emits", flood)]
    """,
)


@pytest.mark.parametrize("isolation", ["inprocess", "process"])
async def test_ten_10_mb_emits_are_refused(make_ext, settings_file, tmp_path: Path, isolation):
    make_ext("emitter", EMITTER, {"isolation": isolation, "permissions": {"emit": ["emitter.*"]}})
    config = settings(settings_file, call_timeout_s=30)
    async with running_kernel(config) as kernel:
        outcomes = json.loads(await command(kernel, "/flood"))
        counts = await kernel.bus.stats()
    assert len(outcomes) == 10
    assert all(
        o.startswith("PayloadTooLargeError: payload for topic 'emitter.blob'") for o in outcomes
    )
    assert "10485771 bytes of JSON, over the limit of 262144" in outcomes[0]
    assert counts.get("events", 0) < 10
    assert (tmp_path / "data" / "events.db").stat().st_size < MB
