"""Questions a worker asks through the database (ADR 0091, core/kernel/consent/elsewhere.py):
shown as a notice naming `/answer ID`, answered on another worker's `UiRequests` with
the checks of a local answer, read back by the asker; a step driven again (same turn)
finds its open question and an answer given meanwhile. PostgreSQL (skipped without it)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from core.config import StorageSettings
from core.extensions.contract import TurnContext, UserRequest
from core.extensions.errors import NotAvailableError
from core.kernel.consent import Responder
from core.kernel.consent.elsewhere import QuestionsElsewhere
from core.kernel.consent.ui import UiRequests
from core.kernel.hooks import FrameRecorder
from support.harness import wait_for

TURN = TurnContext(
    channel_id="chan", user_id="u1", session_id="workflow:r1", turn_id="workflow:r1:ok"
)
ASKED = Responder("chan", "u1")


class Bus:
    """What a worker publishes: notices and frames."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, topic: str, source: str, payload: dict[str, Any], **_: Any) -> int:
        self.events.append((topic, payload))
        return len(self.events)

    def question_ids(self) -> list[str]:
        texts = [p["text"] for t, p in self.events if t == "system.user.notify"]
        return [m.group(1) for t in texts if (m := re.search(r"/answer (\w+)", t))]

    def decisions(self) -> list[str]:
        return [p["decision"] for t, p in self.events if t == "hook.ui"]


def worker(dsn: str, bus: Bus) -> tuple[UiRequests, QuestionsElsewhere]:
    elsewhere = QuestionsElsewhere.on(StorageSettings(backend="postgres", postgres_dsn=dsn), bus)
    return UiRequests(lambda _: None, FrameRecorder(bus), lambda _: False, elsewhere), elsewhere


async def test_asked_on_one_worker_answered_on_another(postgres_dsn) -> None:
    bus, other_bus = Bus(), Bus()
    asker, mine = worker(postgres_dsn, bus)
    answerer, theirs = worker(postgres_dsn, other_bus)
    try:
        waiting = asyncio.create_task(asker.ask("workflows", TURN, "confirm", "Go?", [], 60))
        await wait_for(bus.question_ids, timeout=10)
        (qid,) = bus.question_ids()
        assert await answerer.held_elsewhere(qid)
        assert (await answerer.answer(qid, "yes", Responder("chan", "u2"))).startswith("Only")
        assert "yes or no" in await answerer.answer(qid, "maybe", ASKED)
        assert await answerer.answer(qid, "yes", ASKED) == "Answered: yes"
        assert await asyncio.wait_for(waiting, 10) == "yes"
        assert bus.decisions() == ["asked", "answered"]
        assert not await answerer.held_elsewhere(qid)  # the row is gone with the question
        assert (await answerer.answer(qid, "no", ASKED)).startswith("There is no open question")
        with pytest.raises(NotAvailableError, match="secret"):
            await asker.ask("workflows", TURN, "secret", "Your key?", [], 60)
    finally:
        await mine.aclose()
        await theirs.aclose()


async def test_a_step_driven_again_finds_its_question_and_the_answer_given_meanwhile(
    postgres_dsn,
) -> None:
    bus = Bus()
    asker, elsewhere = worker(postgres_dsn, bus)
    try:
        request = UserRequest("q1st", "confirm", "Go?", (), "u1", 60.0)  # as ask makes it
        kept = await elsewhere.keep(request, "chan", "u1", "workflow:r1:ok")
        # the worker that asked died here; the person answers on another worker
        assert await elsewhere.settle(kept.id, "yes")
        assert await asyncio.wait_for(asker.ask("workflows", TURN, "confirm", "Go?", [], 60), 10)
        assert bus.question_ids() == [kept.id]  # shown again under the same id
    finally:
        await elsewhere.aclose()
