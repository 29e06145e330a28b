"""Fallback chains: a ``Model`` that tries the next model when one fails (ADR 0061).

The SDK calls the model once per step of a run (``get_response`` or
``stream_response``), with every item of the steps before it. So a chain
that falls over *inside* one call repeats only the failed step: a tool a
completed step called has run and its output is in the input the next model
gets; it is not run again.

A model falls over on what is not the request's fault — the server
unreachable, no answer before the provider's ``timeout_s``, 408/409/429, or
a 5xx — after the provider's own retries (``max_retries``). A 400, 401,
403, 404 or 422 is the request's (or the settings') fault: it is raised at
once, whatever the chain holds, as a ``ModelFailedError`` that names the
model, its provider and the status, the provider's words masked of every
configured secret (the same for a chain of one model that failed). A model
that failed cools down (``ModelHealth``, a circuit breaker): it is skipped
for ``cooldown_s``, doubling while it keeps failing (a 429's ``retry-after``
when that is longer), and tried again after. When every model of a chain
cools, they are tried all the same, in order: a turn is never refused for
cooling alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

import openai
from agents.models.interface import Model, ModelTracing

from core.agents.errors import AgentLayerError, ModelFailedError
from core.runtime import REDACTOR

if TYPE_CHECKING:
    from agents.agent_output import AgentOutputSchemaBase
    from agents.handoffs import Handoff
    from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
    from agents.model_settings import ModelSettings
    from agents.tool import Tool
    from openai.types.responses.response_prompt_param import ResponsePromptParam

__all__ = [
    "SERVED_MODEL",
    "AllModelsFailedError",
    "FallbackModel",
    "ModelHealth",
    "falls_over",
]

log = logging.getLogger("core.agents.fallback")

# the label (``provider/model``) of the model that served the last response in this
# context: the usage meter reads it in ``on_llm_end``, right after the call
SERVED_MODEL: ContextVar[str | None] = ContextVar("hearth_served_model", default=None)

_FALL_OVER_STATUSES = frozenset({408, 409, 429})

# (model label, outcome: "ok" | "failed" | "skipped") after each attempt
AttemptObserver = Callable[[str, str], None]


def falls_over(exc: BaseException) -> bool:
    """Whether ``exc`` is a model's failure the next model may take over from:
    unreachable, too slow, rate limited, a server error. A request the server
    refused as wrong (400, 401, 403, 404, 422) is not: another model would be
    sent the same request, or the settings are wrong."""
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _FALL_OVER_STATUSES or exc.status_code >= 500
    return isinstance(exc, TimeoutError | ConnectionError)


def _retry_after_s(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass(slots=True)
class _Breaker:
    failures: int = 0
    cool_until: float = 0.0
    last_error: str = ""


class ModelHealth:
    """Circuit breakers, one per model label, shared by every chain of a kernel;
    and which model served last (``/status``, ``doctor``, metrics)."""

    def __init__(
        self,
        cooldown_s: float = 30.0,
        cooldown_max_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cooldown_s = cooldown_s
        self.cooldown_max_s = max(cooldown_max_s, cooldown_s)
        self._clock = clock
        self._breakers: dict[str, _Breaker] = {}
        self.last_served: str | None = None
        self.observers: list[AttemptObserver] = []

    def cooling(self, label: str) -> float:
        """Seconds ``label`` still cools down (0: it may be tried)."""
        breaker = self._breakers.get(label)
        return 0.0 if breaker is None else max(breaker.cool_until - self._clock(), 0.0)

    def cooling_models(self) -> dict[str, tuple[float, str]]:
        """Every model cooling now: label -> (seconds left, the error that cooled it)."""
        now = self._clock()
        return {
            label: (b.cool_until - now, b.last_error)
            for label, b in sorted(self._breakers.items())
            if b.cool_until > now
        }

    def succeeded(self, label: str) -> None:
        self._breakers.pop(label, None)
        self.last_served = label
        self._tell(label, "ok")

    def failed(self, label: str, exc: BaseException) -> float:
        """Cool ``label`` down; returns for how long."""
        breaker = self._breakers.setdefault(label, _Breaker())
        breaker.failures += 1
        seconds = min(self.cooldown_s * 2.0 ** (breaker.failures - 1), self.cooldown_max_s)
        seconds = max(seconds, min(_retry_after_s(exc) or 0.0, self.cooldown_max_s))
        breaker.cool_until = self._clock() + seconds
        breaker.last_error = _one_line(exc)
        self._tell(label, "failed")
        return seconds

    def skipped(self, label: str) -> None:
        self._tell(label, "skipped")

    def _tell(self, label: str, outcome: str) -> None:
        for observer in self.observers:
            observer(label, outcome)


class AllModelsFailedError(AgentLayerError):
    """Every model of a chain failed one step of a turn; ``failures`` holds
    (model label, what went wrong) for each, in the order they were tried."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = list(failures)
        tried = "; ".join(f"{label}: {error}" for label, error in self.failures)
        super().__init__(f"every model failed ({tried})")


class FallbackModel(Model):
    """The models of a chain, first one first; see the module's docstring."""

    def __init__(self, chain: Sequence[tuple[str, Model]], health: ModelHealth) -> None:
        if not chain:
            raise ValueError("a fallback chain needs at least one model")
        self.chain = list(chain)
        self.health = health
        # a chain of one has no order to choose (cooling or not, its model is tried)
        self._sole = len(self.chain) == 1

    @property
    def labels(self) -> list[str]:
        return [label for label, _ in self.chain]

    def _order(self) -> list[tuple[str, Model]]:
        """The chain with cooling models left out (all of them when all cool)."""
        ready = [(label, m) for label, m in self.chain if not self.health.cooling(label)]
        if not ready:
            return list(self.chain)
        for label, _ in self.chain:
            if self.health.cooling(label):
                self.health.skipped(label)
        return ready

    def _failed(self, label: str, exc: Exception, failures: list[tuple[str, str]]) -> None:
        if not falls_over(exc):
            if isinstance(exc, openai.APIStatusError):  # the request's or settings' fault
                raise _model_failed(label, exc, refused=True) from exc
            raise exc
        seconds = self.health.failed(label, exc)
        failures.append((label, _one_line(exc)))
        log.warning("model %s failed (%s); cooling %.0f s", label, _one_line(exc), seconds)
        if len(self.chain) == 1:
            raise _model_failed(label, exc, refused=False) from exc  # no chain to go on

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        failures: list[tuple[str, str]] = []
        for label, model in self.chain if self._sole else self._order():
            try:
                response = await model.get_response(
                    system_instructions,
                    input,
                    model_settings,
                    tools,
                    output_schema,
                    handoffs,
                    tracing,
                    previous_response_id=previous_response_id,
                    conversation_id=conversation_id,
                    prompt=prompt,
                )
            except Exception as exc:
                self._failed(label, exc, failures)
                continue
            self.health.succeeded(label)
            SERVED_MODEL.set(label)
            return response
        raise AllModelsFailedError(failures)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        """Falls over only before a model's first event: once text reached the
        user, another model cannot take the answer back; a later failure is raised."""
        failures: list[tuple[str, str]] = []
        for label, model in self.chain if self._sole else self._order():
            stream = model.stream_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
            try:
                first = await anext(aiter(stream))
            except StopAsyncIteration:
                self.health.succeeded(label)
                SERVED_MODEL.set(label)
                return
            except Exception as exc:
                self._failed(label, exc, failures)
                continue
            SERVED_MODEL.set(label)
            yield first
            async for event in stream:
                yield event
            self.health.succeeded(label)
            SERVED_MODEL.set(label)
            return
        raise AllModelsFailedError(failures)

    async def close(self) -> None:
        for _, model in self.chain:
            await model.close()


def _model_failed(label: str, exc: BaseException, *, refused: bool) -> ModelFailedError:
    """``exc`` of the model ``label`` (``provider/model``) as the user may read it:
    the provider's own message (the ``error.message`` of its body, else the
    exception's text) on one line, every configured secret masked, cut short."""
    provider, _, model = label.partition("/")
    body = getattr(exc, "body", None)
    said = body.get("message") if isinstance(body, dict) else None
    text = " ".join(str(said or exc).split()) or type(exc).__name__
    return ModelFailedError(
        provider, model, getattr(exc, "status_code", None), _cut(text), refused=refused
    )


def _one_line(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = f"{status} {text}" if status and not text.startswith(str(status)) else text
    return _cut(text)


def _cut(text: str) -> str:
    """Masked before it is cut, which could split a secret."""
    text = REDACTOR.redact(text)
    return text if len(text) <= 160 else text[:159] + "…"
