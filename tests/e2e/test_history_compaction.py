"""History compaction (issue 13): a conversation's stored history stays within
``turns.history_max_items`` / ``turns.history_max_tokens``. The oldest whole
turns become one summary item — written by the session's model, shaped or
replaced by ``on_compaction`` hooks, or dropped when no summary can be had —
in one transaction, journaled as a ``hook.compaction`` frame."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sqlite3
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agents.testing import ModelStep, ScriptedModel, assistant_message

from conftest import PROJECT_ROOT, ext_code
from core.agents.model_router import ModelRouter
from core.config import ModelsSettings, Settings, StorageSettings, TurnsSettings
from core.extensions.contract import CompactionPlan, TurnContext
from core.extensions.loading.capabilities import Capability
from core.kernel.compaction import (
    COMPACTION_INSTRUCTIONS,
    SUMMARY_HEADER,
    HistoryBudget,
    HistoryCompactor,
    Summarise,
    choose_cut,
)
from core.kernel.conversations.ledger import (
    ConversationSession,
    LedgerSession,
    StoredItem,
    StoredReply,
)
from core.kernel.conversations.session_storage import session_storage_for
from core.kernel.conversations.sessions import Conversations
from core.kernel.hooks import FrameRecorder, HookCaller, HookEntry, HookRegistry
from support.harness import (
    CAPTURE_CHANNEL,
    CAPTURE_MANIFEST,
    CONVERSING,
    running_kernel,
    session_history,
    wait_for,
)
from support.hooks_kit import FrameLog

MESSAGE_KEYS = itertools.count()
TURN = TurnContext(channel_id="cli", user_id="u1", session_id="cli:u1", turn_id="m-42")
Item = dict[str, Any]


# ------------------------------------------------------------------ histories


def user(text: str) -> Item:
    return {"role": "user", "content": text}


def answer(text: str) -> Item:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call(call_id: str, name: str = "lookup") -> Item:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"}


def output(call_id: str, text: str = "found it") -> Item:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def exchange(n: int, tools: int = 0) -> list[Item]:
    """One turn as the kernel stores it: the question, tool steps, the answer."""
    steps = [step for t in range(tools) for step in (call(f"c{n}.{t}"), output(f"c{n}.{t}"))]
    return [user(f"question {n}"), *steps, answer(f"answer {n}")]


class Plan:
    """An ``on_compaction`` hook returning ``plan`` (or raising, or hanging)."""

    def __init__(self, plan: CompactionPlan | None = None, *, behave: str = "answer") -> None:
        self.plan, self.behave = plan, behave
        self.seen: list[list[Item]] = []

    async def on_compaction(self, items: list[Item], turn: TurnContext) -> CompactionPlan | None:
        self.seen.append(items)
        if self.behave == "raise":
            raise RuntimeError("compaction hook broke")
        if self.behave == "hang":
            await asyncio.Event().wait()
        return self.plan


def registry(*hooks: tuple[str, int, Plan]) -> HookRegistry:
    entries = [
        (Capability.COMPACTION, HookEntry(owner, priority, order, target))
        for order, (owner, priority, target) in enumerate(hooks)
    ]
    return HookRegistry(lambda: (), extra=lambda: entries)


def summary_model(*texts: str) -> ScriptedModel:
    return ScriptedModel([[assistant_message(text)] for text in texts])


def compactor(
    summarise: Summarise | ScriptedModel | None,
    *hooks: tuple[str, int, Plan],
    frames: FrameLog | None = None,
    hook_timeout_s: float = 5.0,
    **turns: Any,
) -> HistoryCompactor:
    """A compactor on the model ``summarise`` (``None``: no model configured)."""
    if summarise is None:
        source: Summarise | ModelRouter = ModelRouter(ModelsSettings(default=None))
    elif isinstance(summarise, ScriptedModel):
        source = ModelRouter(ModelsSettings(), overrides={"*": summarise})
    else:
        source = summarise
    return HistoryCompactor(
        TurnsSettings(**{"history_max_items": 8, **turns}),
        source,
        registry(*hooks),
        HookCaller(hook_timeout_s),
        FrameRecorder(frames or FrameLog()),
    )


@pytest.fixture
async def sqlite_session(tmp_path: Path) -> AsyncIterator[LedgerSession]:
    """The conversation's session in a fresh ``sessions.db``, as the kernel opens it."""
    conversations = Conversations(tmp_path / "sessions.db")
    await conversations.open()
    session = await conversations.session("cli:u1")
    assert isinstance(session, LedgerSession)
    yield session
    await conversations.aclose()


@pytest.fixture
async def session(
    tmp_path: Path, storage_backend: dict[str, str]
) -> AsyncIterator[ConversationSession]:
    """The conversation's session in a fresh ``sessions.db`` or PostgreSQL database."""
    storage = StorageSettings.model_validate(storage_backend)
    conversations = Conversations(
        tmp_path / "sessions.db",
        storage=session_storage_for(Settings(storage=storage), tmp_path / "sessions.db"),
    )
    await conversations.open()
    yield await conversations.session("cli:u1")
    await conversations.aclose()


async def store(session: ConversationSession, *turns: list[Item]) -> None:
    """Commit each exchange as the kernel does: items and ledger row together."""
    for items in turns:
        reply = StoredReply(f"m-{next(MESSAGE_KEYS)}", "cli", "u1", "ok")
        await session.commit_turn(reply, items)


def rows(db: Path) -> list[tuple[int, Item]]:
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT id, message_data FROM agent_messages ORDER BY id").fetchall()
    conn.close()
    return [(row_id, json.loads(data)) for row_id, data in found]


def summary_text(item: Item) -> str:
    assert item["role"] == "user" and item["content"].startswith(SUMMARY_HEADER + "\n")
    return str(item["content"][len(SUMMARY_HEADER) + 1 :])


def no_orphans(items: list[Item]) -> bool:
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    results = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    return results <= calls


# ------------------------------------------------------------------ the budget


async def test_over_budget_the_oldest_turns_become_one_summary_and_the_newest_stay_whole(
    session: ConversationSession,
) -> None:
    await store(session, *(exchange(n) for n in range(6)))  # 12 items, budget 8, keep 4
    assert len(await session.history(200)) == 12  # the in-memory tail is warm
    model = summary_model("The user asked questions 0 to 3.")

    assert await compactor(model).compact_if_needed(session, TURN)

    history = await session.history(200)
    assert summary_text(history[0]) == "The user asked questions 0 to 3."
    assert history[1:] == [*exchange(4), *exchange(5)]  # whole, unchanged, in order
    asked = str(model.calls[0].input)
    assert all(f"question {n}" in asked and f"answer {n}" in asked for n in range(4))
    assert "question 4" not in asked
    assert model.calls[0].system_instructions == COMPACTION_INSTRUCTIONS
    model.assert_complete()


async def test_under_budget_nothing_changes_and_no_model_is_called(
    sqlite_session: LedgerSession, tmp_path: Path
) -> None:
    session = sqlite_session
    await store(session, *(exchange(n) for n in range(4)))  # exactly 8 items: at the budget
    before = rows(tmp_path / "sessions.db")
    model = ScriptedModel([])

    assert not await compactor(model).compact_if_needed(session, TURN)
    assert not await compactor(model, history_max_items=None).compact_if_needed(session, TURN)

    assert rows(tmp_path / "sessions.db") == before
    assert model.calls == ()


async def test_the_token_budget_counts_json_characters_over_four(
    sqlite_session: LedgerSession, tmp_path: Path
) -> None:
    session = sqlite_session
    big = [user("question 0"), call("c0"), output("c0", "x" * 4000), answer("answer 0")]
    await store(session, big, exchange(1), exchange(2))
    chars = sum(len(json.dumps(item)) for _, item in rows(tmp_path / "sessions.db"))
    model = summary_model("A long lookup happened.")
    at_budget = compactor(model, history_max_items=None, history_max_tokens=chars // 4 + 1)
    assert not await at_budget.compact_if_needed(session, TURN)

    budget = chars // 4 - 1
    assert await compactor(
        model, history_max_items=None, history_max_tokens=budget
    ).compact_if_needed(session, TURN)

    history = await session.history(None)
    assert summary_text(history[0]) == "A long lookup happened."
    assert history[1:] == [*exchange(1), *exchange(2)]
    kept_chars = sum(len(json.dumps(item)) for item in history[1:])
    assert kept_chars / 4 <= budget * 0.5
    assert "x" * 100 in str(model.calls[0].input)  # the summariser saw the tool result


async def test_a_second_compaction_folds_the_earlier_summary_in(
    session: ConversationSession,
) -> None:
    model = summary_model("first summary", "second summary")
    await store(session, *(exchange(n) for n in range(5)))
    assert await compactor(model).compact_if_needed(session, TURN)
    await store(session, *(exchange(n) for n in range(5, 9)))

    assert await compactor(model).compact_if_needed(session, TURN)

    history = await session.history(None)
    assert summary_text(history[0]) == "second summary"
    assert [i for i in history if str(i.get("content", "")).startswith(SUMMARY_HEADER)] == [
        history[0]
    ]
    assert history[1:] == [*exchange(7), *exchange(8)]
    assert "first summary" in str(model.calls[1].input)


# ------------------------------------------------------------------ the cut


@pytest.mark.parametrize("tools", [1, 3])
async def test_a_tool_call_and_its_result_are_never_separated(
    session: ConversationSession, tools: int
) -> None:
    # turns with tool steps straddle the keep boundary wherever it falls
    await store(session, *(exchange(n, tools=tools) for n in range(6)))
    stored = await session.history(None)

    assert await compactor(summary_model("summary"), history_max_items=20).compact_if_needed(
        session, TURN
    )

    history = await session.history(None)
    kept = history[1:]
    assert kept == stored[len(stored) - len(kept) :]  # a suffix of whole turns
    assert kept[0]["role"] == "user" and no_orphans(kept)
    assert len(kept) <= 10


def test_a_cut_never_leaves_a_tool_result_whose_call_is_summarised() -> None:
    # an unusual history: a user message between a call and its result
    items = [
        user("q0"),
        answer("a0"),
        user("q1"),
        call("c1"),
        user("q2"),
        output("c1"),
        answer("a"),
    ]
    stored = [StoredItem(n, item, 10) for n, item in enumerate(items)]

    # keeping 5 items: the cut is at q1, before the call (q2 would orphan the result)
    assert choose_cut(stored, HistoryBudget(max_items=6, max_tokens=None, keep_fraction=0.9)) == 2
    # keeping 4 items: only q2 would fit, and it is refused: all is summarised
    assert choose_cut(stored, HistoryBudget(6, None, keep_fraction=0.7)) == len(items)


def test_when_no_turn_fits_the_keep_share_everything_is_summarised() -> None:
    items = [*exchange(0), *exchange(1, tools=4)]  # the last turn alone: 10 items
    stored = [StoredItem(n, item, 10) for n, item in enumerate(items)]

    assert choose_cut(stored, HistoryBudget(8, None, 0.5)) == len(items)


# ------------------------------------------------------------------ who writes the summary


async def test_hook_instructions_are_added_to_what_the_model_is_asked(
    session: ConversationSession,
) -> None:
    await store(session, *(exchange(n) for n in range(6)))
    model = summary_model("Dates: none.")
    dates = Plan(CompactionPlan(instructions="Keep every date the user mentioned."))
    frames = FrameLog()

    assert await compactor(model, ("dates", 50, dates), frames=frames).compact_if_needed(
        session, TURN
    )

    asked = model.calls[0].system_instructions or ""
    assert asked.startswith(COMPACTION_INSTRUCTIONS)
    assert asked.endswith("Keep every date the user mentioned.")
    assert dates.seen == [[*exchange(0), *exchange(1), *exchange(2), *exchange(3)]]
    (_, payload, _) = frames.published[0]
    assert (payload["owner"], payload["by"]) == ("dates", "model")


async def test_a_hook_summary_replaces_the_model_and_the_first_one_wins(
    session: ConversationSession,
) -> None:
    await store(session, *(exchange(n) for n in range(6)))
    model = ScriptedModel([])  # any model call would fail the test
    shaper = Plan(CompactionPlan(instructions="ignored once a summary exists"))
    first = Plan(CompactionPlan(summary="Questions 0-3 were answered."))
    later = Plan(CompactionPlan(summary="not this one"))
    frames = FrameLog()
    hooks = [("later", 10, later), ("shaper", 90, shaper), ("first", 50, first)]

    assert await compactor(model, *hooks, frames=frames).compact_if_needed(session, TURN)

    history = await session.history(None)
    assert summary_text(history[0]) == "Questions 0-3 were answered."
    assert model.calls == ()
    assert len(shaper.seen) == 1 and len(first.seen) == 1 and later.seen == []
    (_, payload, _) = frames.published[0]
    assert (payload["owner"], payload["by"]) == ("first", "first")


@pytest.mark.parametrize("behave", ["raise", "hang"])
async def test_a_failing_or_late_hook_leaves_the_summary_to_the_model(
    session: ConversationSession, behave: str, caplog: pytest.LogCaptureFixture
) -> None:
    await store(session, *(exchange(n) for n in range(6)))
    model = summary_model("model summary")
    broken = Plan(CompactionPlan(summary="never used"), behave=behave)

    compacting = compactor(model, ("broken", 50, broken), hook_timeout_s=0.3)
    assert await compacting.compact_if_needed(session, TURN)

    assert summary_text((await session.history(None))[0]) == "model summary"
    assert any("on_compaction of broken" in r.getMessage() for r in caplog.records)


async def test_without_a_model_the_old_items_are_dropped_with_one_log_line(
    session: ConversationSession, caplog: pytest.LogCaptureFixture
) -> None:
    await store(session, *(exchange(n) for n in range(6)))
    frames = FrameLog()

    with caplog.at_level(logging.INFO, logger="core.kernel.compaction"):
        assert await compactor(None, frames=frames).compact_if_needed(session, TURN)

    assert await session.history(None) == [*exchange(4), *exchange(5)]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "No model configured" in warnings[0].getMessage()
    (_, payload, _) = frames.published[0]
    assert (payload["owner"], payload["by"], payload["after"]) == ("kernel", "dropped", None)


@pytest.mark.parametrize("failure", ["error", "late"])
async def test_a_failing_or_late_summary_drops_the_old_items(
    session: ConversationSession, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    await store(session, *(exchange(n) for n in range(6)))

    async def hang(_call: Any) -> Any:
        await asyncio.Event().wait()

    step = ModelStep.respond(hang) if failure == "late" else RuntimeError("model is down")
    compacting = compactor(ScriptedModel([step]), compaction_timeout_s=0.3)

    assert await compacting.compact_if_needed(session, TURN)

    assert await session.history(None) == [*exchange(4), *exchange(5)]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert ("model is down" if failure == "error" else "turns.compaction_timeout_s") in said


# ------------------------------------------------------------------ atomicity


async def test_a_failure_before_commit_leaves_the_old_history(
    sqlite_session: LedgerSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = sqlite_session
    db = tmp_path / "sessions.db"
    await store(session, *(exchange(n) for n in range(6)))
    before = rows(db)

    class FailsAtCommit(sqlite3.Connection):
        deleted_rows_seen: int | None = None

        def commit(self) -> None:
            self.deleted_rows_seen = self.execute("SELECT COUNT(*) FROM agent_messages").fetchone()[
                0
            ]
            raise sqlite3.OperationalError("disk I/O error")

    conn = sqlite3.connect(db, check_same_thread=False, factory=FailsAtCommit)
    monkeypatch.setattr(session, "_get_connection", lambda: conn)

    with pytest.raises(sqlite3.OperationalError):
        await compactor(summary_model("lost")).compact_if_needed(session, TURN)

    assert conn.deleted_rows_seen == 5  # inside the transaction: summary + 4 kept
    conn.close()
    monkeypatch.undo()
    assert rows(db) == before
    assert await session.history(None) == [item for _, item in before]


CRASHING_CHILD = textwrap.dedent(
    """
    import asyncio, os, sqlite3, sys
    from core.extensions.contract import TurnContext
    from core.kernel.compaction import HistoryCompactor
    from core.kernel.hooks import FrameRecorder, HookCaller, HookRegistry
    from core.kernel.conversations.ledger import LedgerSession
    from core.config import TurnsSettings

    class DiesAtCommit(sqlite3.Connection):
        def commit(self):
            os._exit(17)  # the process dies inside the transaction, after the delete

    class NoFrames:
        async def publish(self, *args, **kwargs):
            return 0

    async def summarise(items, instructions):
        return "never stored"

    async def main():
        session = LedgerSession("cli:u1", sys.argv[1])
        conn = sqlite3.connect(sys.argv[1], check_same_thread=False, factory=DiesAtCommit)
        session._get_connection = lambda: conn
        compactor = HistoryCompactor(
            TurnsSettings(history_max_items=8), summarise, HookRegistry(lambda: ()),
            HookCaller(1.0), FrameRecorder(NoFrames()),
        )
        await compactor.compact_if_needed(session, TurnContext(session_id="cli:u1"))

    asyncio.run(main())
    """
)


async def test_a_crash_inside_the_transaction_leaves_the_old_history(
    sqlite_session: LedgerSession, tmp_path: Path
) -> None:
    session = sqlite_session
    db = tmp_path / "sessions.db"
    await store(session, *(exchange(n) for n in range(6)))
    before = rows(db)

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CRASHING_CHILD,
        str(db),
        cwd=PROJECT_ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(child.communicate(), 60)

    assert child.returncode == 17, stderr.decode()
    assert rows(db) == before
    reopened = LedgerSession("cli:u1", db)
    try:
        assert await compactor(summary_model("after the crash")).compact_if_needed(reopened, TURN)
        assert summary_text((await reopened.history(None))[0]) == "after the crash"
    finally:
        reopened.close()


# ------------------------------------------------------------------ in the kernel

KEEPER = ext_code(
    header="from core.extensions.contract import CompactionPlan",
    body="""
    async def on_compaction(self, items, turn):
        asked = [i["content"] for i in items if i.get("role") == "user"]
        return CompactionPlan(summary="The user asked: " + "; ".join(asked))
    """,
)


async def test_an_extension_writes_the_summary_in_a_running_kernel_and_the_frame_is_journaled(
    make_ext: Callable[..., Path], settings_file: Callable[..., Path], tmp_path: Path
) -> None:
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("keeper", KEEPER, CONVERSING)
    model = ScriptedModel([[assistant_message(f"answer {n}")] for n in range(3)])  # the turns
    path = settings_file(turns={"history_max_items": 4})
    async with running_kernel(path, model=model) as k:
        channel = k.loader.instance("capture")
        for n in range(3):
            await channel.say(f"question {n}")
            await wait_for(lambda n=n: len(channel.sent or []) == n + 1, timeout=15)
        key = k.conversations.key("capture", "u1")
        turn = TurnContext(channel_id="capture", user_id="u1", session_id=key, turn_id="t-1")
        async with k.conversations.lock(key):
            compacted = await k.shaping.compactor.compact_if_needed(
                await k.conversations.session(key), turn
            )
        frames = await k.bus.journal.recent_events(topic="hook.compaction")

    assert compacted
    history = session_history(tmp_path / "data", key)
    assert summary_text(history[0]) == "The user asked: question 0; question 1"
    assert [i.get("content") for i in history[1:2]] == ["question 2"]
    (frame,) = frames
    assert frame.source == "kernel" and frame.correlation_id == "t-1"
    payload = frame.payload
    assert (payload["owner"], payload["hook"], payload["by"]) == (
        "keeper",
        "on_compaction",
        "keeper",
    )
    assert (payload["dropped"], payload["kept"]) == (4, 2)
    assert payload["after"] == "The user asked: question 0; question 1"
    assert [i.get("content") for i in payload["before"]][::2] == ["question 0", "question 1"]
