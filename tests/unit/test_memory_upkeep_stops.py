"""The memory extension's conversation upkeep stops when it is cancelled, even when a
turn ends at that moment. On Python 3.11 ``asyncio.wait_for`` returned the awaited
result instead when the two met (cpython gh-86296): the loop went on waiting an hour,
and the kernel's shutdown waited for it (a CI run hung on this)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace

from core.extensions.contract import TurnContext
from sandbox.extensions.memory.conversation_search import ConversationSearch
from sandbox.extensions.memory.turn_store import TurnStore
from support.harness import awaits, wait_for


async def test_a_turn_ending_as_the_kernel_stops_does_not_keep_the_upkeep_running(
    tmp_path: Path,
) -> None:
    store = TurnStore(tmp_path / "turns.sqlite3")
    words_only: object = SimpleNamespace(enabled=False)
    search = ConversationSearch(store, words_only, logging.getLogger("test"), keep_days=30)  # type: ignore[arg-type]
    await search.open()
    upkeep = asyncio.create_task(search.run())
    # it has purged and waits for the next turn (in asyncio's code, not the store's)
    await wait_for(lambda: any("/asyncio/" in frame for frame in awaits(upkeep)))
    turn = TurnContext(channel_id="cli", user_id="u1", session_id="s1")
    await search.record(turn, [("user", "hello", 1.0)])  # a turn ended ...
    upkeep.cancel()  # ... as the kernel stops
    done, _ = await asyncio.wait({upkeep}, timeout=5)
    assert done, "the upkeep went on after its cancel:\n" + "\n".join(awaits(upkeep))
    assert upkeep.cancelled()
    await store.close()
