"""One replay: a fresh kernel fed a recorded conversation, frame streams compared.

``replay_trace`` builds a ``Kernel`` from the current settings, code and
extensions on a temporary data directory (the grants copied, so the same
extensions load), with ``ReplayedModel`` standing in for every model and
``RecordedTools`` for side-effecting and kernel tools. Channel extensions
(``permissions.user_messages``) are not started — they would talk to the
outside world; a silent channel takes the conversation's channel id. Then,
turn by turn, it publishes the recorded user message, answers the questions
the turn asks with the recorded decisions (``hook.approval``), waits until
the turn's reply is recorded, and compares the turn's frames with the
recorded ones. It stops at the first divergence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import FunctionTool

from core.config import ReplaySettings, Settings
from core.events.topics import PostProcessTopics, RecordTopics, SystemTopics
from core.extensions.access.grant_store import GRANTS_FILE
from core.extensions.loading.manifest import ManifestError, load_manifest
from core.kernel.consent import CORE_SOURCE, Responder
from core.kernel.consent.wording import Choice
from core.kernel.conversations.sessions import Conversations
from core.kernel.runner import Kernel
from core.replay.compare import Divergence, first_divergence
from core.replay.errors import ReplayError
from core.replay.standins import RecordedTools, ReplayedModel, ReplayState
from core.replay.trace import Frame, RecordedTurn, Trace, build_trace, frames_of
from core.runtime import JOURNAL_FILE

__all__ = ["ReplayReport", "replay_kernel", "replay_trace"]

log = logging.getLogger("core.replay")

SOURCE = "replay"
KERNEL_RESULTS = (RecordTopics.HOOK_PREFIX, PostProcessTopics.PREFIX, RecordTopics.REPLAY_PREFIX)
_CHOICES: dict[str, Choice] = {"approved": "once", "always": "always", "denied": "deny"}


@dataclass(slots=True)
class ReplayReport:
    """``identical`` or the first ``divergence``; how much was compared."""

    session_id: str
    turns: int = 0  # a workflow run's: steps
    frames: int = 0
    divergence: Divergence | None = None
    notes: list[str] = field(default_factory=list)
    unit: str = "turns"

    @property
    def identical(self) -> bool:
        return self.divergence is None

    def as_dict(self) -> dict[str, Any]:
        report = {
            "session": self.session_id,
            "status": "identical" if self.identical else "diverged",
            self.unit: self.turns,
            "frames": self.frames,
            "divergence": self.divergence.as_dict() if self.divergence else None,
        }
        return {**report, "notes": self.notes} if self.notes else report


class _SilentChannel:
    """Takes the replies of the replayed conversation (nobody reads them)."""

    async def send_to_user(self, user_id: str, message: str) -> None:
        return None

    async def send_message(self, message: str) -> None:
        return None


class _SilentStreamingChannel(_SilentChannel):
    """The same for a conversation whose answers were streamed: the model is asked
    to stream again, and the recorded stream is played back."""

    async def on_stream_start(self, user_id: str) -> None:
        return None

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        return None

    async def on_stream_status(self, user_id: str, status: str) -> None:
        return None

    async def on_stream_end(self, user_id: str, full_text: str) -> None:
        return None


async def replay_trace(
    trace: Trace, settings: Settings, *, upto: int | None = None, turn_timeout_s: float = 120.0
) -> ReplayReport:
    """Replay ``trace`` (up to turn ``upto``, 1-based) and report the first divergence."""
    turns = trace.turns[:upto] if upto else trace.turns
    if upto is not None and not 1 <= upto <= len(trace.turns):
        raise ReplayError(f"--turn {upto}: the conversation has turns 1 to {len(trace.turns)}")
    state = ReplayState()
    async with replay_kernel(settings, trace, state) as kernel:
        return await _replay_turns(kernel, state, trace.session_id, turns, turn_timeout_s)


@contextlib.asynccontextmanager
async def replay_kernel(
    settings: Settings, trace: Trace, state: ReplayState
) -> AsyncIterator[Kernel]:
    """A running kernel of the current settings, code and extensions on a temporary
    data directory, its models answered from ``state`` and the tools that must not
    run stood in for; the trace's channels silent. Gone (with its data) after."""
    tmp = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="hearth-replay-"))
    try:
        data_dir = tmp / "data"
        disabled = await asyncio.to_thread(_prepare, settings, trace, data_dir)
        kernel = Kernel(
            _replay_settings(settings, data_dir),
            model_overrides={"*": ReplayedModel(state)},
            disabled_extensions=disabled,
        )

        def must_not_run(tool: FunctionTool) -> bool:
            """Side-effecting (consent's word), the kernel's own: they read the live
            system (clock, extension list, restart), or a wasm extension's that was
            granted the clock or randomness (ADR 0085): its answer drew on them."""
            info = kernel.consent.catalog.info(tool)
            record = kernel.loader.records.get(info.source)
            wasm = record.manifest.wasm if record is not None and record.manifest else None
            drawing = wasm is not None and (wasm.clock or wasm.random)
            return info.side_effects or info.source == CORE_SOURCE or drawing

        kernel.recorder.stand_in = RecordedTools(state, must_not_run)
        async with _running(kernel):
            assert kernel.router is not None
            for channel_id in {t.channel_id for t in trace.turns if t.channel_id}:
                kernel.router.register_channel(channel_id, _silent(trace.turns, channel_id))
            yield kernel
    finally:
        await asyncio.to_thread(shutil.rmtree, tmp, True)


def _prepare(settings: Settings, trace: Trace, data_dir: Path) -> dict[str, str]:
    """The replay's data dir with the user's grants; the extensions not to start."""
    data_dir.mkdir()
    grants = settings.data_dir / GRANTS_FILE
    if grants.exists():
        shutil.copy2(grants, data_dir / GRANTS_FILE)
    return _channels(settings, trace)


async def _replay_turns(
    kernel: Kernel,
    state: ReplayState,
    session_id: str,
    turns: list[RecordedTurn],
    turn_timeout_s: float,
) -> ReplayReport:
    report = ReplayReport(session_id)
    journal = kernel.data_dir / JOURNAL_FILE
    for number, turn in enumerate(turns, 1):
        state.begin(turn)
        got = await _one_turn(kernel, turn, number, journal, turn_timeout_s)
        report.turns, report.frames = number, report.frames + len(turn.frames)
        report.divergence = first_divergence(number, turn.frames, got)
        if report.divergence is not None:
            break
    return report


async def _one_turn(
    kernel: Kernel, turn: RecordedTurn, number: int, journal: Path, timeout_s: float
) -> list[Frame]:
    payload: dict[str, Any] = {
        "text": turn.text,
        "user_id": turn.user_id,
        "channel_id": turn.channel_id,
    }
    if turn.sender_id:
        payload["sender_id"] = turn.sender_id
    await kernel.bus.publish(SystemTopics.USER_MESSAGE, SOURCE, payload)
    replay_id = await _poll(lambda: _nth_turn_id(kernel, number), timeout_s, number)
    decisions = [
        f.payload
        for f in turn.frames
        if f.topic == RecordTopics.HOOK_APPROVAL and f.payload.get("decision") != "asked"
    ]
    answered: set[str] = set()

    async def done() -> bool:
        await _answer_questions(kernel, replay_id, decisions, answered)
        sessions = kernel.conversations
        session_id = kernel.conversations.session_id(sessions.key(turn.channel_id, turn.user_id))
        session = await sessions.session_by_id(session_id)
        return await session.recorded(replay_id) is not None

    await _poll(done, timeout_s, number)
    raw = await asyncio.to_thread(frames_of, journal, [replay_id])
    return build_trace("replay", raw).turns[0].frames


async def _nth_turn_id(kernel: Kernel, number: int) -> str | None:
    events = await kernel.bus.journal.recent_events(number + 1, topic=RecordTopics.REPLAY_TURN)
    return events[0].correlation_id if len(events) >= number else None


async def _answer_questions(
    kernel: Kernel, turn_id: str, decisions: list[dict[str, Any]], answered: set[str]
) -> None:
    """Each question the replayed turn asks gets the recorded decision on that call."""
    asked = await kernel.bus.journal.recent_events(200, topic=RecordTopics.HOOK_APPROVAL)
    desk = kernel.consent.desk
    for event in reversed(asked):
        p = event.payload
        qid = str(p.get("approval_id"))
        if event.correlation_id != turn_id or p.get("decision") != "asked" or qid in answered:
            continue
        answered.add(qid)
        recorded = next((d for d in decisions if d.get("call_id") == p.get("call_id")), None)
        if recorded is None:
            recorded = next((d for d in decisions if d.get("tool") == p.get("tool")), None)
        if recorded is not None:
            decisions.remove(recorded)
        decision = str(recorded.get("decision")) if recorded else "timeout"
        paused = desk.paused(turn_id)
        choice = _CHOICES.get(decision)
        if paused is None or decision not in (*_CHOICES, "superseded"):
            await desk.expire(qid)  # recorded as timed out (or not recorded at all)
            continue
        responder = Responder(paused.channel_id, paused.user_id, paused.owner_id)
        if choice is None:  # a new message came instead of an answer
            await desk.supersede(Conversations.key(paused.channel_id, paused.user_id), responder)
        else:
            await desk.answer(qid, choice, responder)


async def _poll(probe: Callable[[], Awaitable[Any]], timeout_s: float, number: int) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ReplayError(f"turn {number} did not finish within {timeout_s:g} s")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _running(kernel: Kernel) -> Any:
    task = asyncio.create_task(kernel.run(), name="replay-kernel")
    ready = asyncio.create_task(kernel.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        ready.cancel()
        task.result()
        raise ReplayError("the replay kernel stopped while starting")
    try:
        yield kernel
    finally:
        kernel.request_shutdown()
        async with asyncio.timeout(60):
            await task


def _silent(turns: list[RecordedTurn], channel_id: str) -> _SilentChannel:
    streamed = any(
        f.payload.get("streamed") for t in turns if t.channel_id == channel_id for f in t.frames
    )
    return _SilentStreamingChannel() if streamed else _SilentChannel()


def _replay_settings(settings: Settings, data_dir: Path) -> Settings:
    """The current settings on ``data_dir``, recording on, no metrics server; a
    workflow step's retry comes at once (a replay does not wait). Always SQLite in
    ``data_dir``, one process: a replay on PostgreSQL settings must not write into
    the live database the running kernels share."""
    return settings.model_copy(
        update={
            "paths": settings.paths.model_copy(update={"data": data_dir}),
            "storage": settings.storage.model_copy(update={"backend": "sqlite"}),
            "kernel": settings.kernel.model_copy(update={"role": "all"}),
            "replay": ReplaySettings(record=True),
            "metrics": settings.metrics.model_copy(update={"listen": None}),
            "workflows": settings.workflows.model_copy(update={"retry_delay_s": 0.0}),
        }
    )


def _channels(settings: Settings, trace: Trace) -> dict[str, str]:
    """Extensions not started in a replay: channels (they speak as the user), the
    conversation's own channel, and extensions that act on the kernel's results
    (they subscribe to ``hook.*``, ``postprocess.*`` or ``replay.*``: a webhook
    would POST the replayed results again; what they do is not compared)."""
    off = {t.channel_id: "replay: the conversation's channel" for t in trace.turns if t.channel_id}
    root = settings.extensions_dir
    for ext_dir in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        try:
            manifest = load_manifest(ext_dir)
        except ManifestError:
            continue
        if manifest.permissions.user_messages:
            off[manifest.id] = "replay: channels do not run in a replay"
        elif any(p.startswith(KERNEL_RESULTS) for p in manifest.permissions.subscribe or ()):
            off[manifest.id] = "replay: it acts on the kernel's results, outside the turn"
    return off
