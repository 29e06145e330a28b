"""A warm prompt prefix: the stable prefix sent once, before the first message needs it.

A model server on the user's own machine reads a prompt at a few hundred tokens a
second: the ~4k tokens of Hearth's stable prefix (the system prompt and the tool
schemas, ADR 0054) took 159 s on 2 cores, so the first message after every start
waited that long while the later ones, reusing the server's cache, took seconds.
The warmer sends that prefix once with a one-token answer (``max_tokens: 1``)
when the kernel starts, after the wiring changes (a reload, a model switch) and
when the model served again after a failure (its server came back), so the first
real message finds it cached. Where the server keeps slots on disk (llama.cpp
started with ``--slot-save-path``), the warmed slot is saved under a name derived
from the prefix and restored first the next time, which makes even a restarted
server's first request cheap.

Only for providers whose ``warm`` says so (``auto``: servers on this machine,
ADR 0089). The request goes to the bare model: no fallback, no replay record,
no usage booked (a warm-up is nobody's turn), and it carries the header
``X-Hearth-Warm: 1`` so a server's log (and the test suite's fake) can tell it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from agents import ModelSettings, RunContextWrapper
from agents.models.interface import ModelTracing
from openai import APIConnectionError, APIStatusError, APITimeoutError

from core.agents import ORCHESTRATOR_ID, ModelRouter, WarmTarget
from core.extensions.contract import TurnContext
from core.kernel.hooks import PromptAdditions
from core.kernel.wiring import LiveOrchestrator

__all__ = ["WARM_HEADER", "PrefixWarmer", "Warmed"]

T = TypeVar("T")

log = logging.getLogger("core.kernel.turns.warm")

WARM_HEADER = "X-Hearth-Warm"
WARM_INPUT = "."  # the shortest user message every chat template accepts
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 60.0
SLOT = 0  # llama.cpp's first slot: the one a single-slot server (``-np 1``) serves from
UNREACHABLE = (APIConnectionError, APITimeoutError, httpx.TransportError)
LOADING = 503  # llama.cpp answers while it loads the model (``/health`` too)
STARTING_S = 30.0  # how long a server that does not listen yet is waited for


@dataclass(frozen=True, slots=True)
class Warmed:
    """One warm-up: which model, the prefix's key, how long it took and whether the
    server's saved slot was restored first."""

    label: str
    key: str
    seconds: float
    restored: bool


class PrefixWarmer:
    """Keeps the orchestrator's stable prefix in a local model server's cache."""

    def __init__(
        self,
        router: ModelRouter,
        orchestrator: LiveOrchestrator,
        additions: PromptAdditions,
        *,
        keeps_server: bool = False,
    ) -> None:
        self._router = router
        self._orchestrator = orchestrator
        self._additions = additions
        self._wanted = asyncio.Event()
        self._wanted.set()  # at start
        self._slots_unsupported: set[str] = set()
        self._warming = False
        self._served: set[str] = set()  # models that answered a turn since they last failed
        self.last: Warmed | None = None
        # the orchestrator's model when a server on this machine serves it: the router's
        # settings and overrides are fixed for its life, so this is asked once
        self._local = router.local_choice(ORCHESTRATOR_ID)
        # with a fallback, a local server that is down or loading is the chain's to handle:
        # the next model answers now, instead of after the wait for the local one
        self._fallback = self._local is not None and len(router.chain(ORCHESTRATOR_ID)) > 1
        # a server that does not listen may be starting beside Hearth: in the kernel's first
        # STARTING_S, or whenever Hearth keeps it (``models.local_server.start``: restarted
        # after a crash); later, one that does not listen is down, and the turn says so
        self._keeps_server = keeps_server
        self._born = time.monotonic()
        router.health.observers.append(self._model_attempted)

    def reads_anew(self) -> bool:
        """Whether the next turn's model is a server on this machine that must read the
        prompt from its start (minutes on a small CPU): the prefix is wanted or being
        warmed, or it neither was warmed nor served a turn since the start or its last
        failure. A channel then shows progress (ADR 0098)."""
        choice = self._local
        if choice is None:
            return False
        if self._wanted.is_set() or self._warming:
            return True
        warmed = self.last is not None and self.last.label == choice.label
        return not warmed and choice.label not in self._served

    async def after_ready(self, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``work`` once the local server is ready (``until_ready``): a turn for a
        server that is loading its model waits for it instead of failing at once.
        A turn cancelled meanwhile closes ``work``, which never started."""
        try:
            await self.until_ready(timeout_s)
        except BaseException:
            work.close()
            raise
        return await work

    async def until_ready(self, timeout_s: float) -> None:
        """Wait while the next turn's local server is still loading its model (its
        ``/health`` answers 503), up to ``timeout_s``, or does not listen yet, up to
        ``STARTING_S`` while it may be starting beside Hearth (``_starting_s``). A turn
        sent meanwhile would fail at once and cool the model down; after the wait it
        goes as it would. Not when the model has a fallback: that one answers meanwhile."""
        choice = self._local
        root = _server_root(choice.provider.base_url) if choice else None
        if root is None or self._fallback:
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        delay = 0.25
        async with httpx.AsyncClient(timeout=RETRY_MAX_S) as client:
            while True:
                try:
                    response = await client.get(f"{root}/health")
                    if response.status_code != LOADING:
                        return  # ready, or a server without llama.cpp's /health
                    limit = timeout_s
                except httpx.TransportError:
                    limit = self._starting_s()
                if loop.time() - started + delay > limit:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _starting_s(self) -> float:
        """How long a server that does not listen is waited for: ``STARTING_S`` where
        Hearth keeps it, else what is left of the kernel's first ``STARTING_S``."""
        if self._keeps_server:
            return STARTING_S
        return max(0.0, STARTING_S - (time.monotonic() - self._born))

    def want(self) -> None:
        """Warm again soon: the prefix changed (a reload) or the server may have lost it."""
        self._wanted.set()

    async def run(self) -> None:
        """Warm whenever wanted; a server that does not answer is retried with backoff
        (1 s doubling to 60 s) until it does: it may still be starting beside Hearth."""
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            delay = RETRY_FIRST_S
            while True:
                self._warming = True
                try:
                    self.last = await self.warm()
                    break
                except Exception as exc:
                    if not _not_ready(exc):
                        log.warning(
                            "prompt warm-up failed; the first message reads the whole prompt",
                            exc_info=True,
                        )
                        break
                    if delay == RETRY_FIRST_S:
                        log.info("prompt warm-up: the model server is not ready yet (%s)", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                finally:
                    self._warming = False

    async def warm(self) -> Warmed | None:
        """Send the stable prefix once (``None``: nothing to warm for this model)."""
        target = self._router.warm_target(ORCHESTRATOR_ID)
        if target is None:
            return None
        context = RunContextWrapper(context=TurnContext())
        # the additions a turn applies with no condition met: exactly the stable ones
        additions = await self._additions.for_turn(context.context, "")
        agent = self._orchestrator.current.agent(
            additions.system_suffix or None, system_prefix=additions.system_prefix or None
        )
        system = await agent.get_system_prompt(context)
        tools = await agent.get_all_tools(context)
        key = _prefix_key(target.choice.label, system, [_tool_text(t) for t in tools])
        started = time.monotonic()
        restored = await self._slot(target, "restore", key)
        settings = agent.model_settings.resolve(
            ModelSettings(max_tokens=1, extra_headers={WARM_HEADER: "1"})
        )
        await target.model.get_response(
            system,
            [{"role": "user", "content": WARM_INPUT}],
            settings,
            tools,
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        if not restored:
            await self._slot(target, "save", key)
        warmed = Warmed(target.choice.label, key, time.monotonic() - started, restored)
        log.info(
            "prompt warm-up: %s holds the prefix (%.1f s%s)",
            warmed.label,
            warmed.seconds,
            ", restored from its saved slot" if restored else "",
        )
        return warmed

    async def _slot(self, target: WarmTarget, action: str, key: str) -> bool:
        """llama.cpp's ``POST /slots/0?action=save|restore`` (with ``--slot-save-path``);
        ``False`` where the server has no such thing (tried once per server)."""
        root = _server_root(target.choice.provider.base_url)
        if root is None or root in self._slots_unsupported:
            return False
        async with httpx.AsyncClient(timeout=target.choice.provider.timeout_s) as client:
            response = await client.post(
                f"{root}/slots/{SLOT}", params={"action": action}, json={"filename": key}
            )
        if response.status_code == 200:
            return True
        if response.status_code in (400, 404, 405, 501) and action == "save":
            self._slots_unsupported.add(root)  # no slot files on this server
        return False

    def _model_attempted(self, label: str, outcome: str) -> None:
        """A turn's call to the warmed model failed: its server may be down and come
        back with an empty cache, so warm again (retried until it answers)."""
        if outcome == "ok":
            self._served.add(label)
        elif outcome == "failed":
            self._served.discard(label)
            if self.last is not None and self.last.label == label:
                self.want()


def _not_ready(exc: Exception) -> bool:
    """The server does not listen yet, or still loads its model: try again later."""
    if isinstance(exc, APIStatusError):
        return exc.status_code == LOADING
    return isinstance(exc, UNREACHABLE)


def _prefix_key(label: str, system: str, tools: list[str]) -> str:
    digest = hashlib.sha256(json.dumps([label, system, tools]).encode()).hexdigest()
    return f"hearth-prefix-{digest[:16]}.bin"


def _tool_text(tool: Any) -> str:
    schema = getattr(tool, "params_json_schema", None)
    return json.dumps([tool.name, getattr(tool, "description", ""), schema], sort_keys=True)


def _server_root(base_url: str | None) -> str | None:
    """``http://127.0.0.1:8089`` for ``http://127.0.0.1:8089/v1``: llama.cpp serves
    its own endpoints (slots) beside the OpenAI-compatible ones."""
    if not base_url:
        return None
    return base_url.rstrip("/").removesuffix("/v1")
