"""One model turn under a deadline, shaped by the extensions' hooks.

``TurnRunner.run`` compacts the history when it is over its budget
(``core/kernel/compaction``), reads it (at most ``turns.history_max_items``),
passes the user's text through the input hooks (plain text ``in``, then
``on_input_messages``, which may answer instead of the model), asks the routing
hooks for the model, runs the orchestrator on the turn's note + input with no
``session`` (the history joins each request, ADR 0101), and passes the answer
through the output hooks (tags, ``on_llm_output``, plain text ``out``).
``#name`` tokens of activated post-processors are taken out of the text before
any hook sees it, and the post-processors run on the rendered answer (``core/kernel/postprocess/``,
ADR 0023). It returns the reply with the turn's
new history items — the input items as the hooks left them and the run's
``new_items`` — which the caller stores with the ledger row in one
transaction (``LedgerSession.commit_turn``), so a crash can never leave half
a turn or a doubled one in the history.

Whatever happens the turn has an answer: the model's, a hook's short
circuit, a user-facing error line, an apology naming the failure, or —
after ``turns.timeout_s`` — a line saying the turn took too long; a failed
turn adds nothing to the history. Turn start and end are told to the
lifecycle hooks, the end with how it went — for a conversational turn after
its reply is recorded and sent (``tell_end``, ADR 0065), so what the hooks and
observers store (a memory's turn record, the replay record) does not delay it.

A run the SDK interrupts for the user's approval (``needs_approval``, ADR
0021) comes back ``paused``: its ``RunState`` as JSON and the input items,
for the approval flow to store. ``resume`` rebuilds the orchestrator for the
same input, restores the state, applies the user's decisions and runs on;
the turn then ends (or pauses again) like any other.

The request keeps a stable prefix (ADR 0054): the orchestrator's instructions
(the system prompt and the unconditional system additions) and its tools are
the same bytes every turn, and the history is sent as it was stored. What
changes per turn — the clock, the context chain's text, the conditional
system additions — is one system message after the history (``turn_note``),
not stored — unless the provider keeps notes (``turn_notes``, a server on this
machine, ADR 0097): then it is stored before the user's message, so the next
request repeats this one's bytes; the user additions wrap only this turn's message.
"""

from __future__ import annotations

import logging
import time
import uuid
from asyncio import timeout
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar, cast

from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    OutputGuardrailTripwireTriggered,
    Runner,
    RunState,
)
from agents.items import TResponseInputItem
from agents.result import RunResult, RunResultBase, RunResultStreaming

from core.agents import ModelFailedError, dated_clock
from core.agents.observer import NO_TURN_OBSERVER, TurnObserver, TurnObservers
from core.agents.usage import NO_USAGE, TurnUsage, usage_of
from core.extensions.access.state_scope import serving
from core.extensions.contract import ShortCircuit, TurnContext, TurnOutcome
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.commands.table import TOO_SLOW
from core.kernel.compaction import HistoryCompactor
from core.kernel.conversations.ledger import ConversationSession, LedgerWrite
from core.kernel.files import with_parts
from core.kernel.hooks import AppliedAdditions, PromptAdditions, TurnHooks, guardrail_reply
from core.kernel.postprocess import PostProcessing, PostQuery
from core.kernel.shaping.context_chain import ContextChain
from core.kernel.turns.history_splice import PausedRun, marked, unmarked, with_history
from core.kernel.turns.run_items import new_history_items, turn_from_json, turn_to_json
from core.kernel.turns.streaming import Callback, stream_run, stream_text
from core.runtime import REDACTOR

__all__ = ["APOLOGY", "TOO_SLOW", "OrchestratorLike", "TurnResult", "TurnRunner"]

log = logging.getLogger("core.kernel.turns.turn")

T = TypeVar("T")
Status = Literal["answered", "short_circuit", "failed", "timeout", "blocked", "paused", "cancelled"]
Decide = Callable[[RunState[Any, Any]], None]
Items = list[TResponseInputItem]  # input messages, as they are: only typed (``cast``)

NO_ONE = "needs the user's approval, which cannot be asked in a run without a conversation"
APOLOGY = "Sorry, I could not get an answer from the model this time ({reason}). Please try again."
REASON_MAX = 240  # the reason's characters: model, provider, status and the provider's words


class OrchestratorLike(Protocol):
    def agent(
        self,
        extra_instructions: str | None = None,
        *,
        system_prefix: str | None = None,
        model_name: str | None = None,
    ) -> Agent[Any]: ...

    def clock(self, dated: str | None = None) -> str: ...


class CurrentOrchestrator(Protocol):
    """The orchestrator as the wiring has it now (``LiveOrchestrator``), asked once a turn."""

    @property
    def current(self) -> OrchestratorLike: ...


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The reply, and the items to append to the history (empty when the turn failed);
    post-processor output to send after it and records to commit with it;
    ``paused`` (status ``paused``, no reply yet) when the run waits for approvals;
    ``ending``: how a conversational turn went, for its lifecycle hooks and observers
    once its reply is out (``TurnRunner.tell_end``, ADR 0065)."""

    reply: str
    items: list[TResponseInputItem] = field(default_factory=list)
    status: Status = "answered"
    followup: str | None = None
    records: tuple[LedgerWrite, ...] = ()
    run: RunResultBase | None = field(default=None, repr=False)
    paused: PausedRun | None = None
    ending: TurnOutcome | None = None
    hooked: bool = True  # a hook may have heard the turn start (``False``: none was there)
    post_usage: TurnUsage = NO_USAGE  # its post-processors'

    @property
    def usage(self) -> TurnUsage:
        """The tokens the turn's model calls and post-processors used (``NO_USAGE``
        when none ran)."""
        used = usage_of(self.run)
        return used if self.post_usage is NO_USAGE else used + self.post_usage


class TurnRunner:
    """Runs turns and stateless agent calls, each cut off at ``timeout_s``."""

    def __init__(
        self,
        *,
        orchestrator: CurrentOrchestrator,
        context: ContextChain,
        hooks: TurnHooks,
        additions: PromptAdditions,
        compactor: HistoryCompactor,
        max_turns: int,
        timeout_s: float,
        history_max_items: int | None,
        user_facing_errors: tuple[type[Exception], ...] = (),
        post: PostProcessing | None = None,
        observer: TurnObserver = NO_TURN_OBSERVER,
        ledger_records: Callable[[TurnContext], tuple[LedgerWrite, ...]] | None = None,
        keep_notes: bool = False,
    ) -> None:
        self.orchestrator = orchestrator
        self.post = post
        self.observer = observer  # replay recording and metrics (ADR 0052)
        watching = TurnObservers.of(observer)  # who watches what, chosen once
        self._started, self._history = watching.started, watching.history
        self._ended = watching.ended
        self.context = context
        self.hooks = hooks
        self.additions = additions
        self.compactor = compactor
        self.max_turns = max_turns
        self.timeout_s = timeout_s
        self.history_max_items = history_max_items
        self.user_facing_errors = user_facing_errors
        # records of the concluded turn to commit with it (its usage rows, ADR 0061)
        self.ledger_records = ledger_records or (lambda turn: ())
        # the note stored before the user's message: the next request repeats it (ADR 0097)
        self.keep_notes = keep_notes

    async def run(
        self,
        text: str,
        turn: TurnContext,
        session: ConversationSession,
        stream: tuple[Callback, Callback] | None = None,
        parts: list[dict[str, Any]] | None = None,
    ) -> TurnResult:
        """One conversational turn; ``stream`` = (on_chunk, on_tool_call) for live output;
        ``parts``: the pictures the message came with (``input_image``, ADR 0096).

        While an output hook may rewrite the answer, only tool statuses are
        streamed: the user never sees raw text the hooks would have changed.
        """
        with serving(turn):  # extensions' session state is this turn's session
            return await self._run(text, turn, session, stream, parts)

    async def _run(
        self,
        text: str,
        turn: TurnContext,
        session: ConversationSession,
        stream: tuple[Callback, Callback] | None,
        parts: list[dict[str, Any]] | None = None,
    ) -> TurnResult:
        started = time.monotonic()
        for told in self._started:  # the text as the user sent it
            told(turn, text)
        query = await self.post.parse(text, turn) if self.post else PostQuery(text, text)
        hooked = not self.hooks.idle()  # no hook at any point: none is asked this turn
        if hooked:
            await self.hooks.turn_started(turn)

        async def attempt() -> TurnResult:
            await self.compactor.compact_if_needed(session, turn)
            history = await session.history(self.history_max_items)
            for given in self._history:
                given(turn, history)
            said = query.clean
            shaped: list[dict[str, Any]] | ShortCircuit = [{"role": "user", "content": said}]
            if hooked:
                if not history:
                    await self.hooks.session_started(turn)
                said = await self.hooks.plain_text(query.clean, "in", turn)
                shaped = await self.hooks.input_messages([{"role": "user", "content": said}], turn)
            if isinstance(shaped, ShortCircuit):
                answer: TResponseInputItem = {"role": "assistant", "content": shaped.reply}
                asked = cast(Items, [{"role": "user", "content": said}])
                return TurnResult(shaped.reply, [*asked, answer], "short_circuit")
            prompt_text = input_text(shaped)
            if parts:  # the message's pictures join its text (ADR 0096)
                shaped = with_parts(shaped, parts)
            additions = NO_ADDITIONS  # none asked for while no extension has one
            if self.additions.ordered():
                additions = await self.additions.for_turn(turn, prompt_text)
            # kept notes in the history say the channel already, and the day if it is today
            known = dated_clock(history) or "" if self.keep_notes and history else None
            agent, note = await self._agent(prompt_text, turn, additions, shaped, hooked, known)
            asking = shaped if additions is NO_ADDITIONS else additions.wrap_user(shaped)
            given = [*note, *cast(Items, asking)]  # the history joins each request (ADR 0101)
            config, turns = with_history(history), self.max_turns
            if stream is None:
                result: Any = await Runner.run(
                    agent, given, max_turns=turns, context=turn, run_config=config
                )
            else:
                on_chunk, on_tool = stream
                live_text = None if self.hooks.shapes_output() else on_chunk
                result = await stream_run(agent, given, turn, turns, live_text, on_tool, config)
            kept = [*cast(list[dict[str, Any]], note), *shaped] if self.keep_notes else shaped
            return await self._finished(result, kept, turn, hooked)

        outcome = await self._guarded(attempt, f"turn for {turn.session_id}", TurnResult)
        on_status = stream[1] if stream else None
        return await self._concluded(
            turn, outcome, query, started, on_status, tell=False, hooked=hooked
        )

    async def resume(
        self,
        state: Mapping[str, Any],
        input_items: list[dict[str, Any]],
        turn: TurnContext,
        decide: Decide,
        query: PostQuery | None = None,
        session: ConversationSession | None = None,
    ) -> TurnResult:
        """Go on with a paused turn: the orchestrator as it was built for this input
        (context, additions, routing), the ``RunState`` restored, ``decide`` applying
        the user's answers (``approve`` / ``reject``), then the run to its end and the
        post-processors the message asked for (``query``); ``session``'s history
        joins its requests again where the state holds none (ADR 0101)."""
        started = time.monotonic()
        text = input_text(input_items)
        query = query or PostQuery(text, text)

        async def attempt() -> TurnResult:
            additions = await self.additions.for_turn(turn, text)
            agent, _ = await self._agent(text, turn, additions, input_items)  # note: in state
            plain, spliced = unmarked(state)
            restored = await RunState.from_json(agent, plain, context_deserializer=turn_from_json)
            decide(restored)
            history = await session.history(self.history_max_items) if spliced and session else []
            result = await Runner.run(agent, restored, run_config=with_history(history))
            return await self._finished(result, input_items, turn)

        with serving(turn):  # as in ``run``: tools see this turn (state, questions)
            outcome = await self._guarded(
                attempt, f"resumed turn for {turn.session_id}", TurnResult
            )
            return await self._concluded(turn, outcome, query, started)

    async def _finished(
        self,
        result: RunResult | RunResultStreaming,
        input_items: list[dict[str, Any]],
        turn: TurnContext,
        hooked: bool = True,
    ) -> TurnResult:
        """The answer through the output hooks (``hooked``: any may be there), or the pause."""
        if result.interruptions:
            state = marked(result.to_state().to_json(context_serializer=turn_to_json))
            paused = PausedRun(state, input_items, list(result.interruptions))
            return TurnResult("", [], "paused", paused=paused)
        text = str(result.final_output or "")
        if hooked:
            text = (await self.hooks.render_output(text, turn)).text
        items = [*cast(Items, input_items), *new_history_items(result)]
        return TurnResult(text, items, run=result)

    async def _concluded(
        self,
        turn: TurnContext,
        outcome: TurnResult,
        query: PostQuery,
        started: float,
        on_status: Callback | None = None,
        *,
        tell: bool = True,
        hooked: bool = True,
    ) -> TurnResult:
        """The post-processors the message asked for, then turn end for the lifecycle
        hooks — told now, or (``tell=False``) kept in ``ending`` for the caller to tell
        once the reply is out (``tell_end``). A paused turn has not ended: it keeps
        ``query`` for its resumption."""
        status = outcome.status
        if outcome.paused is not None or status == "paused":
            paused = outcome.paused and replace(outcome.paused, query=query)
            await self.observer.turn_paused(turn)
            return replace(outcome, paused=paused)
        if self.post is not None and (query.specs or query.unknown):  # no #name: nothing to run
            post = await self.post.finish(
                query, outcome.reply, outcome.status, outcome.run, turn, on_status
            )
            if post is not None:
                kept = (post.record,) if post.record is not None else ()
                outcome = replace(
                    outcome, followup=post.followup, records=kept, post_usage=post.usage
                )
        elapsed_ms = (time.monotonic() - started) * 1000
        ending = TurnOutcome(status, outcome.reply, elapsed_ms)
        if tell:
            await self.ended(turn, ending)
        else:
            outcome = replace(outcome, ending=ending, hooked=hooked)
        if extra := self.ledger_records(turn):
            outcome = replace(outcome, records=(*outcome.records, *extra))
        return outcome

    async def tell_end(self, turn: TurnContext, result: TurnResult) -> None:
        """The end of a turn ``run`` returned, told once its reply is recorded and
        sent: hooks and observers (the memory's turn record, the replay record, a
        ``turn_end`` command) are not on the reply's path (ADR 0065). The caller
        still holds the conversation's lock, so the next turn sees what they stored."""
        if result.ending is None:
            return
        if not result.hooked:  # no hook heard it start: the kernel's observers, unserved
            await self.ended(turn, result.ending, hooked=False)
            return
        with serving(turn):  # as in ``run``: the hooks see this turn
            await self.ended(turn, result.ending)

    async def ended(self, turn: TurnContext, outcome: TurnOutcome, *, hooked: bool = True) -> None:
        """The turn is over: the lifecycle hooks (``hooked``: any may be), its observers."""
        if hooked and not self.hooks.idle():
            await self.hooks.turn_ended(turn, outcome)
        for ended in self._ended:
            await ended(turn, outcome)

    async def run_stateless(
        self, prompt: str, *, source: str, turn: TurnContext | None = None
    ) -> str:
        """One orchestrator run with no history (``system.agent.task``, ``invoke_agent``;
        a workflow's agent step passes its person's ``turn``).

        The prompt comes from an extension, not the user: input hooks do not
        apply; the answer may reach the user, so output hooks do."""
        turn = turn or _agent_turn(source)

        async def attempt() -> TurnResult:
            agent, note = await self._agent(prompt, turn, AppliedAdditions())
            given = [*note, *cast(Items, [{"role": "user", "content": prompt}])]
            result = await Runner.run(agent, given, max_turns=self.max_turns, context=turn)
            while result.interruptions:  # nobody to ask in a stateless run (ADR 0021)
                state = result.to_state()
                for item in result.interruptions:
                    state.reject(item, rejection_message=f"not run: {item.tool_name} {NO_ONE}")
                result = await Runner.run(agent, state)
            rendered = await self.hooks.render_output(str(result.final_output or ""), turn)
            return TurnResult(rendered.text)

        outcome = await self._guarded(attempt, f"agent run for {source}", TurnResult)
        return outcome.reply

    async def run_stateless_streamed(
        self, prompt: str, *, source: str, on_chunk: Callback | None, on_tool_call: Callback | None
    ) -> str:
        """Like ``run_stateless``, feeding text deltas and tool names to the callbacks
        (text deltas only while no output hook may rewrite the answer)."""
        turn = _agent_turn(source)
        deadline = timeout(self.timeout_s)
        shaping = self.hooks.shapes_output()
        try:
            async with deadline:
                agent, note = await self._agent(prompt, turn, AppliedAdditions())
                given = [*note, *cast(Items, [{"role": "user", "content": prompt}])]
                text = await stream_text(
                    agent, given, turn, self.max_turns, None if shaping else on_chunk, on_tool_call
                )
                if not shaping:
                    return text
                rendered = (await self.hooks.render_output(text, turn)).text
                if on_chunk is not None:
                    await on_chunk(rendered)
                return rendered
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise TimeoutError(
                f"streamed agent run for {source} took longer than {self.timeout_s:g} s"
                " (turns.timeout_s)"
            ) from exc

    async def _agent(
        self,
        prompt: str,
        turn: TurnContext,
        additions: AppliedAdditions,
        messages: list[dict[str, Any]] | None = None,
        hooked: bool = True,
        kept: str | None = None,
    ) -> tuple[Agent[Any], list[TResponseInputItem]]:
        """The orchestrator for this turn — its instructions the stable prefix, its
        model the one a routing hook chose (if one may choose) — and the turn's note
        for after the history: clock, context chain, conditional additions (``kept``:
        the history keeps notes, which say the channel already; its last full clock
        line, if any, so the clock may say the time alone)."""
        context = await self.context.build(prompt, turn)
        if kept is not None:
            context = self.context.without_channel(context, turn)
        model_name = None  # the default unless a routing hook chooses
        if hooked:
            asked = messages or [{"role": "user", "content": prompt}]
            model_name = await self.hooks.route(asked, turn)
        orchestrator = self.orchestrator.current
        agent = orchestrator.agent(
            additions.system_suffix or None,
            system_prefix=additions.system_prefix or None,
            model_name=model_name,
        )
        return agent, turn_note(orchestrator.clock(kept), context, additions.turn_note)

    async def _guarded(
        self, attempt: Callable[[], Awaitable[T]], what: str, wrap: Callable[..., T]
    ) -> T:
        deadline = timeout(self.timeout_s)
        try:
            async with deadline:
                return await attempt()
        except self.user_facing_errors as exc:
            return wrap(str(exc), status="failed")
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as exc:
            log.info("%s stopped by a guardrail", what)  # journaled as hook.guardrail
            return wrap(guardrail_reply(exc), status="blocked")
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():
                log.error("%s stopped after %s s (turns.timeout_s)", what, self.timeout_s)
                return wrap(TOO_SLOW.format(what="That", seconds=self.timeout_s), status="timeout")
            log.error("%s failed: %s", what, describe_exception(exc), exc_info=True)
            return wrap(APOLOGY.format(reason=_short_reason(exc)), status="failed")


def input_text(messages: list[dict[str, Any]]) -> str:
    """The text of the input messages (what conditions and routing look at)."""
    texts = []
    for message in messages:  # a loop: this runs on every turn's path (bench/path.py)
        if isinstance(content := message.get("content"), str):
            texts.append(content)
    return "\n".join(texts)


NO_ADDITIONS = AppliedAdditions()


def turn_note(*parts: str) -> list[TResponseInputItem]:
    """What changes from turn to turn, as one system message for after the history
    (ADR 0054); stored only where the provider keeps notes (ADR 0097)."""
    return cast(Items, [{"role": "system", "content": "\n\n".join(filter(None, parts))}])


def _agent_turn(source: str) -> TurnContext:
    return TurnContext(agent_id="orchestrator", user_id=source, turn_id=f"agent-{uuid.uuid4().hex}")


def _short_reason(exc: BaseException) -> str:
    """The apology's reason: a model's failure as it names itself (model, provider,
    status), anything else by its type; every configured secret masked before the
    text is cut, which could split one (a provider may echo the API key)."""
    text = str(exc) if isinstance(exc, ModelFailedError) else describe_exception(exc)
    text = REDACTOR.redact(text)
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."
