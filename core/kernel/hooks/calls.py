"""One hook call: under a deadline, contained, logged once.

A hook that raises or outlives ``hooks.timeout_s`` (a command hook: its own
``timeout_s``) is skipped: the caller gets ``SKIPPED`` and goes on with the
data unchanged, the user never sees the error, and the log gets one line
naming the extension, the hook and the turn (a hook failing on every tool
call of a turn logs once for that turn). A result larger than
``max_result_bytes`` (``events.max_payload_bytes``: what the journal would
refuse is not stored in a history either; the bytes of its texts) is skipped
the same way, with a
warning naming the extension and the size. Every call's duration and outcome
go to the caller's ``observer`` (metrics).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Coroutine
from dataclasses import fields, is_dataclass
from time import perf_counter
from typing import Any, Final

from core.extensions.access.served_calls import serving_extension
from core.extensions.contract import Annotated, TurnContext
from core.extensions.loading.lifecycle import describe_exception
from core.kernel.hooks.observer import NO_OBSERVER, CallOutcome, PipelineObserver
from core.kernel.hooks.registry import HookEntry
from core.runtime import Resumed

__all__ = ["SKIPPED", "HookCaller", "kind_of", "result_size"]

log = logging.getLogger("core.kernel.hooks")

SKIPPED: Final = object()  # the hook failed or was late: use the data unchanged
_REMEMBERED = 1024  # (owner, hook, turn) failures remembered for "log once"
DEFAULT_MAX_RESULT_BYTES = 256 * 1024  # events.max_payload_bytes' default


def kind_of(value: object) -> str:
    """``a dict``, ``an int``: what a hook returned, for the log line refusing it."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def result_size(result: object) -> int:
    """A hook result's size: the UTF-8 bytes of every text in it (keys included),
    the printed length of anything else. A cycle or absurd nesting raises
    ``RecursionError``, which the caller contains like any hook failure."""
    if isinstance(result, str):
        return len(result) if result.isascii() else len(result.encode(errors="replace"))
    if isinstance(result, dict):
        return sum(result_size(k) + result_size(v) for k, v in result.items())
    if isinstance(result, (list, tuple)):
        return sum(result_size(item) for item in result)
    if result is None:
        return 0
    if is_dataclass(result) and not isinstance(result, type):  # ShortCircuit, Annotated, ...
        return sum(result_size(getattr(result, f.name)) for f in fields(result))
    return len(repr(result))


class HookCaller:
    """Awaits hook coroutines with the deadline and the containment rules."""

    def __init__(
        self,
        timeout_s: float,
        observer: PipelineObserver = NO_OBSERVER,
        *,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self.timeout_s = timeout_s
        self.observer = observer  # told the duration and outcome of every call (metrics)
        self.max_result_bytes = max_result_bytes
        self._logged: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    async def call(
        self, entry: HookEntry, hook: str, turn: TurnContext, pending: Awaitable[Any]
    ) -> Any:
        """The hook's result, or ``SKIPPED`` when it raised, timed out or answered more
        than ``max_result_bytes``.

        A coroutine is first run up to its first suspension: a hook that
        returns without awaiting anything (most do) costs no timer at all, and
        a deadline could not interrupt that synchronous part anyway. Only a
        hook that really waits runs on under the deadline.
        """
        timeout_s = self.timeout_s if entry.timeout_s is None else entry.timeout_s
        with serving_extension(entry.owner, turn):  # its questions belong to this turn
            deadline: asyncio.Timeout | None = None
            started = perf_counter()
            outcome: CallOutcome = "cancelled"
            try:
                if isinstance(pending, Coroutine):
                    try:
                        first = pending.send(None)
                    except StopIteration as done:
                        result = self._bounded(entry, hook, turn, done.value)
                        outcome = "ok" if result is not SKIPPED else "error"
                        return result
                    pending = Resumed(pending, first)
                deadline = asyncio.timeout(timeout_s)
                async with deadline:
                    result = await pending
                result = self._bounded(entry, hook, turn, result)
                outcome = "ok" if result is not SKIPPED else "error"
                return result
            except TimeoutError as exc:
                outcome = "error"
                if deadline is None or not deadline.expired():
                    self._log_once(entry, hook, turn, f"failed: {describe_exception(exc)}")
                else:
                    outcome = "timeout"
                    setting = "hooks.timeout_s" if entry.timeout_s is None else "its timeout_s"
                    self._log_once(
                        entry, hook, turn, f"took longer than {timeout_s:g} s ({setting})"
                    )
            except Exception as exc:
                outcome = "error"
                self._log_once(entry, hook, turn, f"failed: {describe_exception(exc)}")
            finally:
                self.observer.callback(
                    hook, entry.owner, (perf_counter() - started) * 1000, outcome
                )
            return SKIPPED

    def _bounded(self, entry: HookEntry, hook: str, turn: TurnContext, result: Any) -> Any:
        """``result``, or ``SKIPPED`` (with one warning) when it is over the size limit."""
        size = result_size(result)
        if size <= self.max_result_bytes:
            return result
        limit = self.max_result_bytes
        why = f"answered {size} bytes, over the limit of {limit} (events.max_payload_bytes)"
        self._log_once(entry, hook, turn, why, level=logging.WARNING)
        return SKIPPED

    def refuse(self, entry: HookEntry, hook: str, turn: TurnContext, why: str) -> object:
        """A result of the wrong shape: skipped like a failure, with the reason logged."""
        self._log_once(entry, hook, turn, f"returned {why}; ignored")
        return SKIPPED

    def text_and_notes(
        self, entry: HookEntry, hook: str, turn: TurnContext, result: Any
    ) -> tuple[str | None, dict[str, Any]]:
        """A text hook's result (``str``, ``Annotated`` or nothing) as (new text or
        ``None`` = unchanged, annotations); any other shape is refused."""
        if result is SKIPPED or result is None:
            return None, {}
        if isinstance(result, str):
            return result, {}
        if isinstance(result, Annotated) and (result.text is None or isinstance(result.text, str)):
            return result.text, dict(result.annotations)
        self.refuse(entry, hook, turn, kind_of(result))
        return None, {}

    def _log_once(
        self,
        entry: HookEntry,
        hook: str,
        turn: TurnContext,
        what: str,
        *,
        level: int = logging.ERROR,
    ) -> None:
        key = (entry.owner, hook, turn.turn_id or turn.session_id or "")
        if key in self._logged:
            return
        self._logged[key] = None
        if len(self._logged) > _REMEMBERED:
            self._logged.popitem(last=False)
        log.log(
            level,
            "hook %s of %s %s; skipped for turn %s (data unchanged)",
            hook,
            entry.owner,
            what,
            turn.turn_id or "-",
        )
