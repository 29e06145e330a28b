"""A paused turn's questions on a database several kernel processes share (ADR 0102):
the worker that paused the turn has no channel, so the question becomes a notice
naming `/approve ID`; another worker's desk — which never saw the turn — takes the
answer (a button's `system.ui.answer` here) with the checks of a local one, and the
asker's out-of-date memory is read back before it acts (a late timer decides
nothing). PostgreSQL (skipped without it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from core.config import StorageSettings
from core.events.models import Event
from core.events.system_payloads import UiAnswer
from core.extensions.contract import ToolCall
from core.kernel.consent import (
    ApprovalDesk,
    ApprovalFlow,
    ApprovalStore,
    PausedTurn,
    Responder,
    UiRequests,
)
from core.kernel.consent.gate import AskedCall
from core.kernel.consent.policy import ToolInfo, Verdict
from core.kernel.conversations.session_schema import sessions_database
from core.kernel.hooks import FrameRecorder
from support.harness import wait_for

TURN = PausedTurn("m1", 1, "chan:u1", "s1", "chan", "u1", "u1", [], {}, {})
LAUNCH = AskedCall(
    ToolCall("launch", {"target": "moon"}, "c1"),
    ToolInfo("launch", "rockets", True, "declared"),
    Verdict("ask", "side effects", "profile"),
)


class Bus:
    """What one process publishes."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.keys: list[str | None] = []

    async def publish(
        self, topic: str, source: str, payload: dict[str, Any], **options: Any
    ) -> int:
        self.events.append((topic, payload))
        self.keys.append(options.get("idempotency_key"))
        return len(self.events)

    def of(self, topic: str) -> list[dict[str, Any]]:
        return [payload for t, payload in self.events if t == topic]


def process(dsn: str, tmp_path: Path, timeout_s: float = 600) -> tuple[ApprovalDesk, Bus]:
    """One worker's desk: the shared tables, no channel of its own."""
    storage = StorageSettings(backend="postgres", postgres_dsn=dsn)
    bus = Bus()
    store = ApprovalStore(sessions_database(tmp_path / "sessions.db", storage))
    desk = ApprovalDesk(store, bus, FrameRecorder(bus), lambda _: None, timeout_s=timeout_s)
    return desk, bus


def button(request_id: str, user_id: str) -> Event:
    answer = UiAnswer(request_id=request_id, answer="once", channel_id="chan", user_id=user_id)
    return Event(7, "system.ui.answer", "chan", answer.to_payload())


async def test_asked_on_one_worker_answered_by_a_button_on_another(postgres_dsn, tmp_path) -> None:
    asker, asker_bus = process(postgres_dsn, tmp_path)
    other, other_bus = process(postgres_dsn, tmp_path)
    try:
        await asker.open()
        await other.open()  # before the turn paused: it knows nothing of it
        assert other.any_paused()  # another process's turn may be waiting
        await asker.ask(TURN, [LAUNCH])
        [notice] = asker_bus.of("system.user.notify")
        found = re.search(r"Reply /approve (\w+) ", notice["text"])
        assert found is not None and notice["channel_id"] == "chan" and notice["user_id"] == "u1"
        question = found.group(1)
        assert notice["text"].startswith('Allow launch(target="moon")?')

        ui = UiRequests(lambda _: None, FrameRecorder(other_bus), other.holds)
        flow = ApprovalFlow(other, None, ui, None, None, None, turn_lock=None)  # type: ignore[arg-type]
        await flow.on_answer_event(button(question, "u2"))  # a member's button: refused
        assert other_bus.of("system.turn.resume") == []
        await flow.on_answer_event(button(question, "u1"))
        [resume] = other_bus.of("system.turn.resume")
        assert resume["message_key"] == "m1"

        await asker.expire(question)  # its timer, late: the answer stands, once
        assert asker_bus.of("system.turn.resume") == []
        paused = asker.paused("m1")
        assert paused is not None and paused.approvals[0].status == "approved"
        decisions = [p["decision"] for t, p in other_bus.events if t == "hook.approval"]
        assert decisions == ["approved"]

        await other.finish("m1")  # the other worker resumed and finished it
        await asker.sync(message_key="m1")
        assert asker.paused("m1") is None
    finally:
        for desk in (asker, other):
            await desk.stop()
            await desk.aclose()


async def test_an_always_given_on_one_worker_counts_on_the_other(postgres_dsn, tmp_path) -> None:
    asker, _ = process(postgres_dsn, tmp_path)
    other, _ = process(postgres_dsn, tmp_path)
    try:
        await asker.open()
        await other.open()
        stored = await asker.ask(TURN, [LAUNCH])
        question = stored.approvals[0].id
        answered = await other.answer(question, "always", Responder("chan", "u1"))
        assert answered.startswith("Allowed: launch")
        assert asker.grant_for("launch") is None
        await asker.sync(conversation="chan:u1")  # a message of the conversation
        assert asker.grant_for("launch") is not None
    finally:
        for desk in (asker, other):
            await desk.stop()
            await desk.aclose()


async def test_a_question_whose_asker_is_gone_is_asked_again_and_times_out_elsewhere(
    postgres_dsn, tmp_path
) -> None:
    asker, _ = process(postgres_dsn, tmp_path, timeout_s=3.0)  # time to ask again first
    other, other_bus = process(postgres_dsn, tmp_path)
    try:
        await asker.open()
        await other.open()
        stored = await asker.ask(TURN, [LAUNCH])
        await asker.stop()  # the asking worker is gone, its timer with it
        late, late_bus = process(postgres_dsn, tmp_path)
        await late.open()
        await late.start()  # a worker starting asks again, under one key for all of them
        [again] = late_bus.of("system.user.notify")
        assert again["text"].startswith("(Still waiting) Allow launch")
        question = stored.approvals[0].id
        assert f"approval:{question}:again" in late_bus.keys
        await late.stop()
        await late.aclose()
        await other.sync(message_key="m1")  # the message delivered again, say
        [resume] = await wait_for(lambda: other_bus.of("system.turn.resume"), timeout=10)
        assert resume["message_key"] == "m1"
        [told] = other_bus.of("system.user.notify")
        assert (
            told["text"]
            == f'Not answered in time: denied: launch(target="moon") (question {question}).'
        )
    finally:
        for desk in (asker, other):
            await desk.stop()
            await desk.aclose()
