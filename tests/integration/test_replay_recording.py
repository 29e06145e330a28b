"""Recording for replay (ADR 0033): secrets never reach the journal, a large
payload is stored once and referenced, a payload too large for one event is
marked rather than lost silently, nothing is recorded outside a turn or with
``replay.record: false``, and extensions cannot forge records."""

from __future__ import annotations

from agents import ModelSettings
from agents.models.interface import ModelTracing
from agents.testing import ScriptedModel, assistant_message

from core.events.topics import RecordTopics
from core.extensions.access.state_scope import serving
from core.extensions.access.topic_rules import KERNEL_ONLY
from core.extensions.contract import TurnContext, TurnOutcome
from core.replay.payloads import PayloadStore
from core.replay.recording import ReplayRecorder
from core.replay.trace import build_trace
from core.runtime import REDACTOR
from support.hooks_kit import FrameLog

SECRET = "replay-test-secret-9f3c2a"  # the redactor is process-wide: a word no other test uses
TURN = TurnContext(channel_id="capture", user_id="u1", session_id="capture:u1", turn_id="7@1.0")


async def ask(model, text: str):
    return await model.get_response(
        "be brief",
        [{"role": "user", "content": text}],
        ModelSettings(),
        [],
        None,
        [],
        ModelTracing.DISABLED,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    )


async def test_secrets_are_redacted_before_they_are_journaled():
    REDACTOR.add([SECRET])
    log = FrameLog()
    recorder = ReplayRecorder(log)
    model = recorder.wrap_model(ScriptedModel([[assistant_message(f"the key is {SECRET}")]]))
    with serving(TURN):
        recorder.turn_started(TURN, f"remember {SECRET}")
        await ask(model, f"my key is {SECRET}")
        assert log.frames == []  # nothing journaled while the turn runs
        await recorder.turn_ended(TURN, TurnOutcome("answered", "ok", 1.0))
    journaled = repr(log.published)
    assert SECRET not in journaled
    assert journaled.count("***") >= 3
    assert [topic for topic, _ in log.frames] == [RecordTopics.REPLAY_TURN]  # one per turn
    ((_, record),) = log.frames
    assert [call["topic"] for call in record["calls"]] == [RecordTopics.REPLAY_MODEL]


async def test_a_large_payload_is_stored_once_and_referenced():
    log = FrameLog()
    store = PayloadStore(log)
    history_item = {"role": "user", "content": "x" * 5000}
    first = await store.ref(history_item)
    again = await store.refs(history_item, history_item)
    assert first == again[0] == again[1] == {"$blob": first["$blob"]}
    blobs = [payload for topic, payload in log.frames if topic == RecordTopics.REPLAY_BLOB]
    assert len(blobs) == 1 and blobs[0]["sha256"] == first["$blob"]
    assert await store.ref("short") == "short"  # small values stay inline


async def test_a_payload_too_large_to_journal_is_marked():
    log = FrameLog()
    store = PayloadStore(log, max_bytes=4096)  # events.max_payload_bytes
    ref = await store.ref("y" * 10_000)
    assert ref["$missing"] and ref["chars"] > 10_000
    assert log.frames == []


async def test_nothing_recorded_outside_a_turn_or_when_off():
    log = FrameLog()
    recorder = ReplayRecorder(log)
    model = recorder.wrap_model(ScriptedModel([[assistant_message("hi")]]))
    await ask(model, "stateless run")  # no conversation turn
    off = ReplayRecorder(log, enabled=False)
    inner = ScriptedModel([[assistant_message("hi")]])
    assert off.wrap_model(inner) is inner
    with serving(TURN):
        off.turn_started(TURN, "hello")
        await off.turn_ended(TURN, TurnOutcome("answered", "hi", 1.0))
    assert log.frames == []


def test_extensions_cannot_publish_replay_records():
    assert "replay." in KERNEL_ONLY


HISTORY = [
    {"role": "user", "content": "earlier question"},
    {"role": "assistant", "content": "earlier answer"},
]


async def ask_with(model, items):
    return await model.get_response(
        "be brief",
        items,
        ModelSettings(),
        [],
        None,
        [],
        ModelTracing.DISABLED,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    )


async def test_a_turn_stores_its_history_by_count_not_again():
    """The history a run was given is in the earlier turns' records: a request
    records how many history items its input starts with, then the new ones."""
    log = FrameLog()
    recorder = ReplayRecorder(log)
    model = recorder.wrap_model(ScriptedModel([[assistant_message("now")]]))
    with serving(TURN):
        recorder.turn_started(TURN, "new question")
        recorder.history_given(TURN, HISTORY)
        await ask_with(model, [*HISTORY, {"role": "user", "content": "new question"}])
        await recorder.turn_ended(TURN, TurnOutcome("answered", "now", 1.0))
    ((topic, record),) = log.frames
    assert topic == RecordTopics.REPLAY_TURN and record["text"] == "new question"
    request = record["calls"][0]["request"]
    assert request["history"] == 2
    assert request["input"] == [{"role": "user", "content": "new question"}]


async def test_an_input_that_does_not_start_with_the_history_is_stored_whole():
    """A model call inside the turn given something else (a post-processor's prompt,
    a history the hooks rewrote) keeps its whole input: nothing is assumed."""
    log = FrameLog()
    recorder = ReplayRecorder(log)
    model = recorder.wrap_model(ScriptedModel([[assistant_message("json")]]))
    other = [{"role": "user", "content": "earlier question"}, {"role": "user", "content": "x"}]
    with serving(TURN):
        recorder.turn_started(TURN, "q")
        recorder.history_given(TURN, HISTORY)
        await ask_with(model, other)
        await recorder.turn_ended(TURN, TurnOutcome("answered", "json", 1.0))
    request = log.frames[0][1]["calls"][0]["request"]
    assert "history" not in request and request["input"] == other


async def test_a_paused_turn_is_recorded_at_the_pause_and_its_rest_after_resuming():
    log = FrameLog()
    recorder = ReplayRecorder(log)
    model = recorder.wrap_model(ScriptedModel([[assistant_message("a")], [assistant_message("b")]]))
    with serving(TURN):
        recorder.turn_started(TURN, "launch")
        await ask(model, "launch")
        await recorder.turn_paused(TURN)  # waits for the user's approval
        await ask(model, "resumed")  # the resumed run, later
        await recorder.turn_ended(TURN, TurnOutcome("answered", "b", 1.0))
        await recorder.turn_ended(TURN, TurnOutcome("answered", "b", 1.0))  # nothing left
    assert [topic for topic, _ in log.frames] == [
        RecordTopics.REPLAY_TURN,
        RecordTopics.REPLAY_CALLS,
    ]
    trace = build_trace(
        "capture:u1",
        [
            {"topic": topic, "payload": payload, "correlation_id": TURN.turn_id}
            for topic, payload in log.frames
        ],
    )
    (recorded,) = trace.turns
    models = [f for f in recorded.frames if f.topic == RecordTopics.REPLAY_MODEL]
    assert [f.payload["request"]["input"][0]["content"] for f in models] == ["launch", "resumed"]


async def test_a_failing_journal_loses_only_the_record():
    class Gone(FrameLog):
        async def publish(self, *args, **kwargs):
            raise OSError("journal gone")

    recorder = ReplayRecorder(Gone())
    with serving(TURN):
        recorder.turn_started(TURN, "hello")
        await recorder.turn_ended(TURN, TurnOutcome("answered", "hi", 1.0))  # does not raise


async def test_turns_that_never_end_do_not_pile_up(monkeypatch):
    """A turn whose task died without an end (killed, cancelled elsewhere) is
    forgotten once too many are open; the turns that do end are still recorded."""
    import core.replay.recording as recording

    monkeypatch.setattr(recording, "OPEN_TURNS", 3)
    log = FrameLog()
    recorder = ReplayRecorder(log)
    lost = [
        TurnContext(channel_id="c", user_id="u", session_id="c:u", turn_id=f"{n}@1")
        for n in range(5)
    ]
    for turn in lost:
        recorder.turn_started(turn, "never ends")
    recorder.turn_started(TURN, "ends")
    await recorder.turn_ended(TURN, TurnOutcome("answered", "ok", 1.0))
    await recorder.turn_ended(lost[0], TurnOutcome("answered", "late", 1.0))  # long forgotten
    assert [payload["text"] for _, payload in log.frames] == ["ends"]
