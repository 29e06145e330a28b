"""``IsolatedExtension``: the kernel-side stand-in for an extension in a plugin host.

``initialize`` spawns the host, sends it the extension's config and declared
secrets (over the channel, never the environment), has it import and
initialize the extension, then turns this object into a class with exactly
the protocols the host reported. When the host dies the record goes
``error`` with the exit reason; the extension supervisor's restart loop
then stops it and ``start()`` launches a fresh host (re-running initialize),
with backoff; the kernel keeps serving meanwhile. Every call has a deadline;
a host that then does not answer a ping is killed (and so restarted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from core.events.models import Event
from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.contract import HOST_ABI_VERSION
from core.extensions.isolation.kernel.host_events import HostSubscriptions
from core.extensions.isolation.kernel.kernel_side import ContextServer
from core.extensions.isolation.kernel.launch import IsolationOptions, LaunchPlan, plan_launch
from core.extensions.isolation.kernel.mixins import proxy_class
from core.extensions.isolation.kernel.process import HostProcess
from core.extensions.isolation.kernel.proxy_core import DEFAULT, ProxyCore
from core.extensions.isolation.kernel.watchdog import HostGuard
from core.extensions.isolation.protocol.errors import (
    CallTimeoutError,
    HostUnavailableError,
    IsolationError,
    PeerClosedError,
)
from core.extensions.isolation.protocol.framing import event_to_wire
from core.extensions.isolation.protocol.messages import (
    Described,
    EventParams,
    FrameError,
    HostMethod,
    LifecycleParams,
    LoadParams,
    PingResult,
    Ready,
    StreamKind,
    StreamParams,
)
from core.extensions.isolation.protocol.rpc import RpcPeer
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.manifest import Manifest, abi_refusal
from core.runtime import guard_extension_logger

log = logging.getLogger("core.isolation")

StatusCallback = Callable[[str, str], None]  # (extension id, why its host is down)
PING_GRACE_S = 1.0
CHANNEL_EXIT_GRACE_S = 1.0
BUSY_CPU_SHARE = 0.4  # of one core, between two pings after a timed-out call
CLOSE_GRACE_S = 2.0


class IsolatedExtension(ProxyCore):
    """Lifecycle and calls of one isolated extension; protocol mixins are added later."""

    def __init__(
        self,
        manifest: Manifest,
        code_dir: Path,
        services: KernelServices,
        options: IsolationOptions,
        on_status: StatusCallback | None = None,
    ) -> None:
        if manifest.entrypoint is None:
            raise IsolationError("isolation: process needs an `entrypoint` (module:Class)")
        self.ext_id = manifest.id
        self.manifest = manifest
        self.code_dir = code_dir  # the snapshot of its code the host imports (ADR 0073)
        self.options = options
        self.described: dict[str, Any] = {}
        self.host_restarts = 0  # hosts launched after the first (metrics)
        self._services = services
        self._on_status = on_status
        self._logger = guard_extension_logger(logging.getLogger(f"ext.{manifest.id}"))
        self._kctx: KernelContext | None = None
        self._plan: LaunchPlan | None = None
        self._host: HostProcess | None = None
        self._peer: RpcPeer | None = None
        self._live = asyncio.Event()
        self._down_reason = "not started"
        self._started = False
        self._closing = False
        self._events = HostSubscriptions(
            manifest.id,
            self._logger,
            deliver=self._deliver,
            live=self._live,
            wait_s=lambda: self.options.call_timeout_s,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._probes: set[asyncio.Task[Any]] = set()

    @property
    def host_pid(self) -> int | None:
        """The plugin host's pid while it runs (tests and diagnostics)."""
        return self._host.pid if self._host is not None and self._host.alive else None

    @property
    def probing(self) -> bool:
        """A host is being checked after a timed-out call (it may yet be killed)."""
        return bool(self._probes)

    @property
    def confined(self) -> bool:
        return self._plan is not None and self._plan.confined

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: KernelContext) -> None:
        self._kctx = context
        self._plan = await plan_launch(self.manifest, self.code_dir, context, self.options)
        await self._launch()
        try:
            capabilities = tuple(str(c) for c in self.described["capabilities"])
            self.__class__ = proxy_class(IsolatedExtension, capabilities)
        except BaseException:
            await self._close_host()  # the loader does not destroy what failed to initialize
            raise

    async def start(self) -> None:
        if not self._live.is_set():  # its host died or was killed: a fresh one
            await self._launch()
            self.host_restarts += 1
        await self._lifecycle("start")
        self._started = True

    async def stop(self) -> None:
        self._started = False
        if self._live.is_set():
            await self._lifecycle("stop")

    async def destroy(self) -> None:
        self._closing = True
        try:
            if self._live.is_set():
                await self._lifecycle("destroy")
        finally:
            await self._close_host()

    async def health_check(self) -> bool:
        if not self._live.is_set():
            return False
        params = LifecycleParams("health_check").to_wire()
        return bool(await self.remote(HostMethod.LIFECYCLE, params))

    async def _lifecycle(self, name: Literal["start", "stop", "destroy"]) -> None:
        params = LifecycleParams(name).to_wire()
        await self.remote(HostMethod.LIFECYCLE, params, deadline=self.options.lifecycle_timeout_s)

    # ------------------------------------------------------------ calls

    async def remote(self, method: str, params: Any, *, deadline: Any = DEFAULT) -> Any:
        """One call into the host with a deadline (``None``: no deadline)."""
        limit = self.options.call_timeout_s if deadline is DEFAULT else deadline
        host, peer = self._host, self._peer
        if not self._live.is_set() or host is None or peer is None:
            raise HostUnavailableError(self.ext_id, self._down_reason)
        what = _describe_call(method, params)
        try:
            return await peer.call(method, params, deadline=limit)
        except CallTimeoutError:
            timed_out = f"{what} timed out ({limit:g} s)"
            self._spawn(self._ping_or_kill(host, peer, timed_out), probe=True)
            raise CallTimeoutError(f"{what} of isolated extension {self.ext_id!r}", limit) from None
        except PeerClosedError:
            raise HostUnavailableError(self.ext_id, await self._exit_reason(host)) from None
        except asyncio.CancelledError:
            # The caller's own deadline (a hook's hooks.timeout_s) or a cancelled turn:
            # the host was told to cancel, and is checked as after a timeout, since
            # a call blocking its event loop cannot be cancelled.
            if not (self._closing or self.probing or peer.closed):
                self._spawn(self._ping_or_kill(host, peer, f"{what} was abandoned"), probe=True)
            raise

    async def _ping_or_kill(self, host: HostProcess, peer: RpcPeer, after: str) -> None:
        """After a call timed out or was abandoned: kill a host that does not answer,
        or keeps burning CPU.

        A call blocking the host's event loop makes it deaf to pings; a sync tool
        spinning in a worker thread (``agents`` runs sync tools in threads, which
        cannot be cancelled) leaves it answering but using a whole core.
        """
        grace = min(PING_GRACE_S, self.options.call_timeout_s)
        try:
            first = await peer.call(HostMethod.PING, deadline=grace)
            await asyncio.sleep(grace)
            second = await peer.call(HostMethod.PING, deadline=grace)
        except IsolationError:
            host.kill(f"killed: unresponsive after {after}")
            return
        try:
            a, b = PingResult.from_wire(first), PingResult.from_wire(second)
        except FrameError as exc:
            host.kill(f"killed: malformed ping answer after {after} ({exc})")
            return
        busy = (b.cpu_s - a.cpu_s) / max(b.at - a.at, 1e-3)
        if busy >= BUSY_CPU_SHARE:
            host.kill(f"killed: still using {busy:.0%} CPU after {after}")

    async def _exit_reason(self, host: HostProcess) -> str:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await host.wait()
        return host.describe_exit() if not host.alive else "the channel to the plugin host closed"

    # ------------------------------------------------------------ host processes

    async def _launch(self) -> None:
        """Spawn a host, load and initialize the extension in it; make it current."""
        assert self._plan is not None and self._kctx is not None
        plan, limit = self._plan, self.options.lifecycle_timeout_s
        self._events.host_replaced()
        guard = HostGuard(plan.guard)
        host = await HostProcess.spawn(
            plan.prefix, cwd=plan.cwd, env=plan.env, logger=self._logger, guard=guard
        )
        server = ContextServer(
            self._kctx, subscribe=self._subscribe, stream=self._stream, logger=self._logger
        )
        peer = RpcPeer(
            host.reader, host.writer, on_request=server.handle, on_notification=server.notified
        )
        self._spawn(self._watch(host, peer))
        try:
            load = LoadParams.from_wire(plan.load_params).to_wire()
            ready = await peer.call(HostMethod.LOAD, load, deadline=limit)
            refusal = ready_refusal(self.manifest, Ready.from_wire(ready, HostMethod.LOAD))
            if refusal is not None:
                raise IsolationError(refusal)
            answer = await peer.call(HostMethod.INITIALIZE, deadline=limit)
            described = Described.from_wire(answer, HostMethod.INITIALIZE).to_wire()
            old = self.described.get("capabilities")
            if old is not None and old != described["capabilities"]:
                raise IsolationError(
                    f"protocols changed since load: {old} -> {described['capabilities']}"
                )
        except BaseException as exc:
            host.kill(f"failed to load: {describe_exception(exc)}")
            if isinstance(exc, PeerClosedError):
                raise IsolationError(await self._exit_reason(host)) from None
            raise
        self.described = described
        self._host, self._peer = host, peer
        self._live.set()

    async def _watch(self, host: HostProcess, peer: RpcPeer) -> None:
        """Serve the host's channel until it or the host ends; then restart it.

        Whatever goes wrong in here ends with the host killed and, unless the
        extension is closing, restarted: a dying watcher must never leave a
        dead host behind an extension marked active.
        """
        serving = asyncio.create_task(peer.serve())
        exited = asyncio.create_task(host.wait())
        try:
            await asyncio.wait({serving, exited}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done() and not host.closing:
                outcome = _outcome(serving)
                if not outcome.startswith("protocol error"):
                    # An exiting host closes its channel first; let the exit show.
                    await asyncio.wait({exited}, timeout=CHANNEL_EXIT_GRACE_S)
                host.kill(f"killed: its channel ended ({outcome})")
            await exited
        except Exception as exc:
            log.exception("isolated extension %s: watcher failed", self.ext_id)
            host.kill(f"killed: its watcher failed ({describe_exception(exc)})")
            with contextlib.suppress(Exception):
                await host.wait()
        finally:
            serving.cancel()
            exited.cancel()
        peer.close(host.describe_exit())
        if host is self._host:
            self._live.clear()
            self._down_reason = host.describe_exit()
            if not self._closing:
                self._host_died(host)

    def _host_died(self, host: HostProcess) -> None:
        """Report the death on the record; the supervisor's restart loop (the
        one for every extension) stops it and starts a fresh host with backoff."""
        reason = host.describe_exit()
        log.error("isolated extension %s: %s; it will be restarted", self.ext_id, reason)
        self._report(reason)

    async def _close_host(self) -> None:
        self._events.refused.flush()
        host, self._host, self._peer = self._host, None, None
        self._live.clear()
        self._down_reason = "stopped"
        if host is not None:
            await host.close(CLOSE_GRACE_S)
        for task in list(self._tasks):
            task.cancel()

    def _report(self, reason: str) -> None:
        if self._on_status is not None and not self._closing:
            self._on_status(self.ext_id, reason)

    def _spawn(self, coro: Any, *, probe: bool = False) -> None:
        task = asyncio.create_task(coro)
        for tasks in (self._tasks, self._probes) if probe else (self._tasks,):
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    # ------------------------------------------------------------ events

    def _subscribe(self, topic: str, handler_id: int, name: str) -> None:
        assert self._kctx is not None
        self._events.subscribe(self._kctx, topic, handler_id, name)

    async def _deliver(self, handler_id: int, event: Event) -> None:
        params = EventParams(handler_id, event_to_wire(event)).to_wire()
        await self.remote(HostMethod.EVENT, params)

    async def _stream(self, stream: int, kind: StreamKind, text: str) -> None:
        await self.remote(HostMethod.STREAM, StreamParams(stream, kind, text).to_wire())


def ready_refusal(manifest: Manifest, ready: Ready) -> str | None:
    """Why the extension may not run on the host that answered ``load`` with
    ``ready``: a host ABI other than the kernel's, or one its manifest's
    ``requires_abi`` excludes (ADR 0086); None: it may."""
    if ready.abi_version != HOST_ABI_VERSION:
        return (
            f"the plugin host of {manifest.id!r} speaks host ABI {ready.abi_version}, "
            f"the kernel ABI {HOST_ABI_VERSION}"
        )
    return abi_refusal(manifest, ready.abi_version)


def _outcome(task: asyncio.Task[str]) -> str:
    """Why a finished ``serve()`` ended (its result, or the exception it died of)."""
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return task.result() if exc is None else f"failed: {describe_exception(exc)}"


def _describe_call(method: str, params: Any) -> str:
    name = params.get("name") if isinstance(params, dict) else None
    if method == HostMethod.CALL_TOOL:
        return f"tool {name!r}"
    if method in (HostMethod.INVOKE, HostMethod.LIFECYCLE, HostMethod.COMMAND):
        return f"{name}()"
    return method
