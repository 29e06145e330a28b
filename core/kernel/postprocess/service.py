"""``PostProcessing``: what the turn runner calls, before and after the model.

``parse`` takes the ``#name`` tokens of the person's activations out of the
message (the model gets the clean text; activations follow the person across
channels, ``activations_key``); ``finish`` tells the person about trailing
``#names`` that are none of theirs, runs the requested
post-processors on the answer the user gets (after the output hooks),
publishes the combined results, and returns the follow-up text and the
record the router commits with the turn. Neither ever raises: a failure
here costs the post-processing, never the answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.result import RunResultBase

from core.agents.errors import ModelNotConfiguredError
from core.agents.model_router import ModelRouter
from core.agents.usage import NO_USAGE, TurnUsage
from core.config import PostProcessSettings, StorageSettings
from core.extensions.contract import (
    Command,
    PostProcessContext,
    PostProcessResult,
    PostProcessTopics,
    TurnContext,
)
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.records import ExtensionRecord
from core.kernel.conversations.session_schema import sessions_database
from core.kernel.conversations.sessions import LEDGER_RETENTION_S
from core.kernel.hooks.frames import FrameSink
from core.kernel.postprocess.activations import ActivationStore
from core.kernel.postprocess.catalog import PostProcessorCatalog
from core.kernel.postprocess.commands import activations_key, postprocess_commands, results_key
from core.kernel.postprocess.facts import RunFacts, run_facts
from core.kernel.postprocess.parsing import PostQuery, PostSpec, parse_query
from core.kernel.postprocess.records import PostRecords, PostTurnRecord
from core.kernel.postprocess.render import followup_text
from core.kernel.postprocess.runner import PostProcessRunner, Requested, Status

__all__ = ["Count", "ModelOf", "PostOutcome", "PostProcessing", "Resolve", "orchestrator_model"]

log = logging.getLogger("core.kernel.postprocess")

ModelOf = Callable[[], tuple[str | None, str | None]]  # (provider, model) of the orchestrator
Resolve = Callable[[TurnContext], TurnContext]  # a turn with its person (``Household.resolve``)
Count = Callable[[str | None, str, TurnUsage], None]  # (turn id, model, tokens): UsageMeter.add
ANSWERED = ("answered", "short_circuit")


@dataclass(frozen=True, slots=True)
class PostOutcome:
    """The follow-up to send under the answer, and the record to commit with the turn."""

    followup: str | None
    record: PostTurnRecord | None  # None: nothing ran (only a notice to show)
    usage: TurnUsage = NO_USAGE  # the tokens the post-processors reported


class PostProcessing:
    """Parsing, running and recording post-processors for the kernel's turns."""

    def __init__(
        self,
        *,
        catalog: PostProcessorCatalog,
        activations: ActivationStore,
        records: PostRecords,
        runner: PostProcessRunner,
        bus: FrameSink,
        model_of: ModelOf = lambda: (None, None),
        resolve: Resolve | None = None,
        count: Count | None = None,
    ) -> None:
        self.catalog = catalog
        self.activations = activations
        self.records = records
        self.runner = runner
        self._bus = bus
        self._model_of = model_of
        # who a turn is for (``Household.resolve``): activations follow the person
        self.resolve: Resolve = resolve or (lambda turn: turn)
        # where processors' tokens are counted (``UsageMeter.add``)
        self.count: Count = count or (lambda turn_id, model, used: None)

    @classmethod
    def build(
        cls,
        db_path: Path,
        bus: FrameSink,
        wired: Callable[[], Sequence[ExtensionRecord]] = lambda: (),
        *,
        settings: PostProcessSettings | None = None,
        model_of: ModelOf = lambda: (None, None),
        storage: StorageSettings | None = None,
        resolve: Resolve | None = None,
        count: Count | None = None,
        names: NamePolicy | None = None,
    ) -> PostProcessing:
        """Post-processing over ``db_path`` (``sessions.db``) and the ``wired`` extensions'
        processors; over PostgreSQL instead when ``storage`` says so (ADR 0035). Each
        conversation starts with ``settings.activate_by_default`` activated (ADR 0063)."""
        settings = settings or PostProcessSettings()
        catalog = PostProcessorCatalog(wired, disabled=settings.disabled, names=names)
        records = PostRecords(
            sessions_database(db_path, storage, what="post-processing records are"),
            retention_s=LEDGER_RETENTION_S,
        )
        activations = ActivationStore(
            sessions_database(db_path, storage, what="activations are"),
            settings.activate_by_default,
        )
        return cls(
            catalog=catalog,
            activations=activations,
            records=records,
            runner=PostProcessRunner(bus, timeout_s=settings.timeout_s),
            bus=bus,
            model_of=model_of,
            resolve=resolve,
            count=count,
        )

    def commands(self) -> list[Command]:
        """``/ext`` and ``/last`` (``commands.py``)."""
        return postprocess_commands(self)

    async def open(self) -> None:
        await self.activations.open()
        await self.records.open()

    async def aclose(self) -> None:
        """Give back what ``open`` took (a connection, or the PostgreSQL pool)."""
        await self.activations.aclose()
        await self.records.aclose()

    async def activated_names(self, channel_id: str, user_id: str) -> list[tuple[str, str]]:
        """``(name, description)`` of every activation of the person writing from
        ``user_id`` on ``channel_id`` (autocomplete, the HTTP API's ``extensions``)."""
        found = []
        turn = self.resolve(TurnContext(channel_id=channel_id, user_id=user_id))
        for activation in await self.activations.of(*activations_key(turn)):
            entry = self.catalog.get(activation.processor)
            found.append((activation.name, entry.description if entry else ""))
        return found

    async def described(self, channel_id: str, user_id: str) -> dict[str, Any]:
        """The person's activations and every available processor with its metadata
        (the web page's panel, ``ExtensionContext.describe_post_processors``)."""
        turn = self.resolve(TurnContext(channel_id=channel_id, user_id=user_id))
        activated = []
        for activation in await self.activations.of(*activations_key(turn)):
            entry = self.catalog.get(activation.processor)
            activated.append(
                {
                    "name": activation.name,
                    "processor": activation.processor,
                    "default_param": activation.default_param,
                    "description": entry.description if entry else "",
                    "output_target": entry.processor.output_target if entry else None,
                    "available": entry is not None,
                }
            )
        available = [
            {
                **entry.info.to_json(),
                "output_target": entry.processor.output_target,
                "builtin": entry.builtin,
                "owner": entry.owner,
            }
            for entry in self.catalog.entries()
        ]
        return {"activated": activated, "available": available}

    # ------------------------------------------------------------ the turn

    async def parse(self, text: str, turn: TurnContext) -> PostQuery:
        """The message without the tokens of activated names, and the specs."""
        if "#" not in text:
            return PostQuery(text, text)
        try:
            names = {a.name for a in await self.activations.of(*activations_key(turn))}
        except Exception:
            log.exception("activations of %s unreadable; #names left in the text", turn.user_id)
            return PostQuery(text, text)
        return parse_query(text, names.__contains__)

    async def finish(
        self,
        query: PostQuery,
        reply: str,
        status: str,
        run: RunResultBase | None,
        turn: TurnContext,
        on_status: Status | None = None,
    ) -> PostOutcome | None:
        """Run the specs on ``reply`` (only when the turn has an answer); a notice
        for each trailing ``#name`` that is not the person's."""
        notice = self._unknown_notice(query.unknown)
        if not query.specs:
            return None if notice is None else PostOutcome(notice, None)
        try:
            facts = run_facts(run)
            results: tuple[PostProcessResult, ...] = ()
            events: tuple[dict[str, Any], ...] = ()
            if status in ANSWERED:
                requested = await self._resolve(activations_key(turn)[0], query.specs)
                base = self._context(query, reply, facts, turn)
                outcome = await self.runner.run(requested, base, on_status)
                results, events = outcome.results, outcome.events
            usage = _usage(facts, results)
            if results:
                await self._publish_results(turn, query, results, usage)
            record = PostTurnRecord(
                message_key=turn.turn_id or "",
                conversation=results_key(turn),
                session_id=turn.session_id,
                original=query.original,
                clean=query.clean,
                specs=query.specs,
                results=results,
                events=events,
                usage=usage,
            )
            shown = "\n\n".join(t for t in (followup_text(results), notice) if t) or None
            return PostOutcome(shown, record, self._counted(turn, results))
        except Exception:
            log.exception("post-processing of turn %s failed; the answer stands", turn.turn_id)
            return None

    def _counted(self, turn: TurnContext, results: Sequence[PostProcessResult]) -> TurnUsage:
        """Each result's reported tokens, counted with the turn's own usage (so
        ``/usage``, ``main.py usage``, the budget and the metrics see them) under the
        model the processor names in ``metadata["model"]``, else
        ``postprocess:PROCESSOR``; their sum."""
        total = NO_USAGE
        for result in results:
            if not (result.input_tokens or result.output_tokens):
                continue
            named = result.metadata.get("model")
            processor = result.metadata.get("processor") or result.name
            model = named if isinstance(named, str) and named else f"postprocess:{processor}"
            used = TurnUsage(max(result.input_tokens, 0), 0, max(result.output_tokens, 0), 1)
            self.count(turn.turn_id, model, used)
            total = total + used
        return total

    def _unknown_notice(self, names: Sequence[str]) -> str | None:
        """One line per ``#name`` the message ended with that is not activated."""
        lines = []
        for name in names:
            if self.catalog.get(name) is not None:
                lines.append(f"▸ #{name} is not activated for you: /ext activate {name}")
            else:
                lines.append(
                    f"▸ #{name} is not one of your post-processors, so nothing ran for it "
                    "(it stayed in the message); /ext lists yours"
                )
        return "\n".join(lines) or None

    async def _resolve(self, conversation: str, specs: Sequence[PostSpec]) -> list[Requested]:
        """Each spec with its activation's processor and the param in effect."""
        activations = {a.name: a for a in await self.activations.of(conversation)}
        requested = []
        for spec in specs:
            activation = activations.get(spec.name)
            processor = activation.processor if activation else spec.name
            param = spec.param
            if param is None and activation is not None:
                param = activation.default_param
            requested.append(Requested(spec, self.catalog.get(processor), processor, param))
        return requested

    def _context(
        self, query: PostQuery, reply: str, facts: RunFacts, turn: TurnContext
    ) -> PostProcessContext:
        provider, model = self._model_of()
        return PostProcessContext(
            answer_text=reply,
            original_query=query.original,
            clean_query=query.clean,
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            channel_id=turn.channel_id,
            user_id=turn.user_id,
            provider=provider,
            model=model,
            answered_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            turn_input_tokens=facts.input_tokens,
            turn_output_tokens=facts.output_tokens,
            total_input_tokens=facts.input_tokens,
            total_output_tokens=facts.output_tokens,
            tools_used=facts.tools_used,
            collected_data=facts.collected_data,
            execution_trace=facts.execution_trace,
        )

    async def _publish_results(
        self,
        turn: TurnContext,
        query: PostQuery,
        results: Sequence[PostProcessResult],
        usage: dict[str, Any],
    ) -> None:
        payload = {
            "turn_id": turn.turn_id,
            "session_id": turn.session_id,
            "channel_id": turn.channel_id,
            "user_id": turn.user_id,
            "query": query.clean,
            "results": {r.name: r.to_dict() for r in results},
            "usage": usage,
        }
        try:
            await self._bus.publish(
                PostProcessTopics.RESULTS,
                "kernel",
                payload,
                correlation_id=turn.turn_id,
                idempotency_key=f"{PostProcessTopics.RESULTS}:{turn.turn_id}",
            )
        except Exception as exc:
            log.error("results of turn %s not journaled: %s", turn.turn_id, exc)


def orchestrator_model(router: ModelRouter) -> ModelOf:
    """(provider, model) the orchestrator resolves to, for the context; ``None``s
    when no model is configured."""

    def of() -> tuple[str | None, str | None]:
        try:
            choice = router.resolve("orchestrator")
        except ModelNotConfiguredError:
            return None, None
        return choice.provider_name, choice.model

    return of


def _usage(facts: RunFacts, results: Sequence[PostProcessResult]) -> dict[str, Any]:
    """The turn's token totals with what post-processors used (and cost)."""
    post_in = sum(r.input_tokens for r in results)
    post_out = sum(r.output_tokens for r in results)
    return {
        "turn_input": facts.input_tokens,
        "turn_output": facts.output_tokens,
        "postprocess_input": post_in,
        "postprocess_output": post_out,
        "postprocess_cost_usd": round(sum(r.cost_usd for r in results), 6),
        "total_input": facts.input_tokens + post_in,
        "total_output": facts.output_tokens + post_out,
    }
