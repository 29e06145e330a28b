"""The held notices' store (ADR 0076) on both databases: a notice is held once per key
(a re-delivered event), read back per channel, address and sender, and forgotten
once its channel took it — and it outlives the connection that wrote it."""

from __future__ import annotations

from core.config import StorageSettings
from core.kernel.turns.held import HeldNotices


async def test_a_notice_is_held_once_per_key_and_read_back_by_address_and_sender(
    tmp_path, storage_backend
):
    storage = StorageSettings(**storage_backend)
    held = HeldNotices.at(tmp_path / "state.db", storage)
    try:
        await held.hold(
            "telegram_channel", "43", "⏰ Reminder: pills", "notify:scheduler:7", "scheduler"
        )
        await held.hold(
            "telegram_channel", "43", "⏰ Reminder: pills", "notify:scheduler:7", "scheduler"
        )
        await held.hold(
            "telegram_channel", "-1001", "group standup", "notify:scheduler:8", "scheduler"
        )
        await held.hold("telegram_channel", "43", "budget used up", None, "kernel")
        await held.hold("other", "43", "elsewhere", "notify:9", "kernel")
    finally:
        await held.aclose()

    again = HeldNotices.at(tmp_path / "state.db", storage)  # a restart
    try:
        waiting = await again.waiting("telegram_channel")
        assert [(n.user_id, n.text, n.source) for n in waiting] == [
            ("43", "⏰ Reminder: pills", "scheduler"),
            ("-1001", "group standup", "scheduler"),
            ("43", "budget used up", "kernel"),
        ]
        mine = await again.waiting("telegram_channel", "43", "scheduler")
        assert [n.text for n in mine] == ["⏰ Reminder: pills"]
        await again.release(waiting[0].key)
        assert [n.text for n in await again.waiting("telegram_channel", "43")] == ["budget used up"]
    finally:
        await again.aclose()
