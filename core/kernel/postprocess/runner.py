"""Running the requested post-processors: one after another, never breaking the answer.

Serial, in the order the user wrote them; each gets the results of those
before it (``previous_results``) and token totals that include their usage.
Before each one a ``postprocess.started`` event is journaled, after it a
``postprocess.completed`` event carrying the whole result (source
``kernel``, correlation id = turn id, idempotency keys per turn and name, so
a turn run again after a crash does not publish twice). A rejected param, an
exception, a result of the wrong type, content that breaks the processor's
``output_schema``, a param outside its ``allowed_values`` or a missed deadline
(``postprocess.timeout_s``) becomes ``success: false`` with the error; the
next processor still runs and the answer is untouched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.extensions.contract import (
    PostProcessContext,
    PostProcessResult,
    PostProcessTopics,
)
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.hooks.frames import FrameSink
from core.kernel.postprocess.catalog import CatalogEntry
from core.kernel.postprocess.parsing import PostSpec

__all__ = ["PostProcessRunner", "Requested", "RunOutcome"]

log = logging.getLogger("core.kernel.postprocess")

Status = Callable[[str], Awaitable[None]]
SOURCE = "kernel"


@dataclass(frozen=True, slots=True)
class Requested:
    """A spec resolved against the user's activations: what runs, with which param."""

    spec: PostSpec
    entry: CatalogEntry | None  # None: the processor is not available now
    processor: str
    param: str | None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """The results in order and the progress events that were published."""

    results: tuple[PostProcessResult, ...]
    events: tuple[dict[str, Any], ...]


class PostProcessRunner:
    """Runs ``Requested`` post-processors for one turn."""

    def __init__(self, bus: FrameSink, *, timeout_s: float) -> None:
        self._bus = bus
        self.timeout_s = timeout_s

    async def run(
        self, requested: Sequence[Requested], base: PostProcessContext, status: Status | None
    ) -> RunOutcome:
        results: dict[str, PostProcessResult] = {}
        events: list[dict[str, Any]] = []
        used_in = used_out = 0
        for item in requested:
            name = item.spec.name
            ident = _identity(base, item)
            events.append(await self._publish(PostProcessTopics.STARTED, ident, base))
            await _tell(status, item.spec.label())  # a stream shows "using #json:minimal…"
            context = dataclasses.replace(
                base,
                total_input_tokens=base.total_input_tokens + used_in,
                total_output_tokens=base.total_output_tokens + used_out,
                previous_results=dict(results),
            )
            started = time.monotonic()
            result = await self._one(item, context)
            elapsed_ms = round((time.monotonic() - started) * 1000, 1)
            target = result.output_target
            if target is None:
                target = item.entry.processor.output_target if item.entry else "silent"
            result = dataclasses.replace(
                result,
                name=name,
                output_target=target,
                metadata={
                    **result.metadata,
                    "processor": item.processor,
                    "param": item.param,
                    "execution_time_ms": elapsed_ms,
                },
            )
            used_in += result.input_tokens
            used_out += result.output_tokens
            results[name] = result
            done = {**ident, "success": result.success, "result": result.to_dict()}
            events.append(await self._publish(PostProcessTopics.COMPLETED, done, base))
        return RunOutcome(tuple(results.values()), tuple(events))

    async def _one(self, item: Requested, context: PostProcessContext) -> PostProcessResult:
        """One processor's result; every failure becomes ``success: false``."""
        name = item.spec.name
        if item.entry is None:
            return _failed(name, f"post-processor {item.processor!r} is not available")
        processor = item.entry.processor
        refused = item.entry.info.refuses(item.param)
        if refused is not None:
            return _failed(name, refused)
        try:
            async with asyncio.timeout(self.timeout_s):
                ok, reason = processor.validate_param(item.param)
                if not ok:
                    return _failed(name, reason or f"param {item.param!r} rejected")
                result = await processor.execute(context, item.param)
        except TimeoutError:
            return _failed(name, f"took longer than {self.timeout_s:g} s (postprocess.timeout_s)")
        except Exception as exc:
            log.warning(
                "post-processor %s (%s of %s) failed: %s",
                name,
                item.processor,
                item.entry.owner,
                describe_exception(exc),
            )
            return _failed(name, describe_exception(exc))
        if not isinstance(result, PostProcessResult):
            return _failed(name, f"execute returned a {type(result).__name__}, not a result")
        try:
            json.dumps(result.content)
        except (TypeError, ValueError) as exc:
            return _failed(name, f"content is not JSON: {exc}")
        mismatch = item.entry.info.mismatch(result.content) if result.success else None
        if mismatch is not None:
            return _failed(name, mismatch)
        return result

    async def _publish(
        self, topic: str, payload: dict[str, Any], base: PostProcessContext
    ) -> dict[str, Any]:
        """Journal one progress event; return it as stored with the turn."""
        key = f"{topic}:{base.turn_id}:{payload['name']}"
        try:
            await self._bus.publish(
                topic, SOURCE, payload, correlation_id=base.turn_id, idempotency_key=key
            )
        except Exception as exc:  # the result stands; only its event is missing
            log.error("%s for #%s not journaled: %s", topic, payload["name"], exc)
        return {"type": topic, "payload": {k: v for k, v in payload.items() if k != "result"}}


def _identity(base: PostProcessContext, item: Requested) -> dict[str, Any]:
    return {
        "turn_id": base.turn_id,
        "session_id": base.session_id,
        "channel_id": base.channel_id,
        "user_id": base.user_id,
        "query": base.clean_query,
        "name": item.spec.name,
        "processor": item.processor,
        "param": item.param,
    }


def _failed(name: str, error: str) -> PostProcessResult:
    return PostProcessResult(name, None, success=False, error=error)


async def _tell(status: Status | None, text: str) -> None:
    """A progress line for a live stream; a channel that fails to show it changes nothing."""
    if status is None:
        return
    try:
        await status(text)
    except Exception as exc:
        log.debug("stream status %r not shown: %s", text, exc)
