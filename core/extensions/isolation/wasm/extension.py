"""``WasmExtension``: an extension whose code is a WebAssembly module (ADR 0085).

It stands where an in-process instance or a process proxy would: the loader
detects its protocols with ``isinstance`` like any other's, because at
initialize it becomes a class with exactly the protocols its guest
described — the process proxies' mixins (tools, hooks) and the post-processor
one. Their calls arrive at ``remote`` with the process RPC's own messages,
which the guest gets as JSON (``abi.py``). A trap or a budget hit discards
the instance and reports the extension failed: the supervisor restarts it
with backoff, as it restarts a dead plugin host; the kernel keeps serving.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.extensions.context.kernel_context import KernelContext
from core.extensions.context.services import KernelServices
from core.extensions.contract import HOST_ABI_VERSION
from core.extensions.isolation.kernel.hook_mixins import HOOK_MIXINS
from core.extensions.isolation.kernel.mixins import ToolProxy
from core.extensions.isolation.kernel.proxy_core import DEFAULT, ProxyCore
from core.extensions.isolation.protocol.errors import HostUnavailableError, remote_error
from core.extensions.isolation.protocol.messages import HostMethod
from core.extensions.isolation.wasm.draws import DrawLog
from core.extensions.isolation.wasm.errors import GuestTrapError, WasmLoadError
from core.extensions.isolation.wasm.postprocess import PostProcessorsProxy
from core.extensions.isolation.wasm.runtime import GuestInstance, WasmBudget, shared_engine
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.manifest import Manifest, abi_refusal
from core.runtime import guard_extension_logger

__all__ = ["DESCRIBE", "WASM_MIXINS", "StatusCallback", "WasmExtension", "wasm_class"]

log = logging.getLogger("core.isolation.wasm")

StatusCallback = Callable[[str, str], None]  # (extension id, why it stopped)
DESCRIBE = "describe"  # the first call: what the guest offers
DRAWS_TOPIC = "wasm.draws"  # under the extension's own namespace: <id>.wasm.draws

# what a guest may offer in ABI 1: tools, the turn pipeline's hooks, post-processors
WASM_MIXINS: dict[str, type[ProxyCore]] = {
    Capability.TOOL: ToolProxy,
    **HOOK_MIXINS,
    Capability.POST_PROCESSOR_PROVIDER: PostProcessorsProxy,
}


class WasmExtension(ProxyCore):
    """Lifecycle and calls of one wasm extension; protocol mixins are added at initialize."""

    def __init__(
        self,
        manifest: Manifest,
        code_dir: Path,
        services: KernelServices | None = None,
        on_status: StatusCallback | None = None,
        draws: DrawLog | None = None,
    ) -> None:
        section = manifest.wasm
        if section is None:
            raise WasmLoadError(manifest.id, "isolation: wasm needs a `wasm:` section")
        self.ext_id = manifest.id
        self.manifest = manifest
        self.module_path = code_dir / section.module  # in the snapshot of its code (ADR 0073)
        self.budget = WasmBudget(
            fuel=section.fuel,
            time_limit_ms=section.time_limit_ms,
            memory_mb=section.memory_mb,
            clock=section.clock,
            random=section.random,
        )
        self.described: dict[str, Any] = {}
        self.restarts = 0  # instances made after the first (metrics, tests)
        self.start_ms = 0.0  # how long the last instance took to compile, start and describe
        self.draws = draws or DrawLog()
        self._on_status = on_status
        self._logger = guard_extension_logger(logging.getLogger(f"ext.{manifest.id}"))
        self._kctx: KernelContext | None = None
        self._guest: GuestInstance | None = None
        self._down_reason = "not started"
        self._closing = False

    @property
    def memory_bytes(self) -> int:
        """The guest's linear memory now (0 while it is not running)."""
        guest = self._guest
        return 0 if guest is None else guest.memory_bytes

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: KernelContext) -> None:
        self._kctx = context
        refused = abi_refusal(self.manifest, HOST_ABI_VERSION)
        if refused is not None:
            raise WasmLoadError(self.ext_id, refused)
        await self._instantiate()
        self.__class__ = wasm_class(tuple(str(c) for c in self.described["capabilities"]))

    async def start(self) -> None:
        if self._guest is None:  # it trapped: a fresh instance (the supervisor's restart)
            await self._instantiate()
            self.restarts += 1

    async def stop(self) -> None:
        """Nothing runs between calls: an instance holds no thread or task."""

    async def destroy(self) -> None:
        self._closing = True
        self._guest = None
        self._down_reason = "stopped"

    async def health_check(self) -> bool:
        return self._guest is not None

    async def _instantiate(self) -> None:
        """Compile (cached by content), instantiate and ``describe``; make it current."""
        began = time.perf_counter()
        try:
            source = self.module_path.read_bytes()
        except OSError as exc:
            raise WasmLoadError(
                self.ext_id, f"cannot read its module {self.module_path}: {exc.strerror or exc}"
            ) from None
        engine = shared_engine()

        def build() -> GuestInstance:
            module = engine.compile(self.ext_id, source)
            return GuestInstance(self.ext_id, engine, module, self.budget, self.draws, self._logger)

        guest = await asyncio.to_thread(build)
        config = {} if self._kctx is None else dict(self._kctx.config)
        try:
            reply, _ = await asyncio.to_thread(
                guest.call, DESCRIBE, {"config": config}, f"{DESCRIBE}()"
            )
        except GuestTrapError as exc:
            raise WasmLoadError(self.ext_id, str(exc)) from None
        if reply.error is not None:
            raise WasmLoadError(self.ext_id, f"describe() failed: {reply.error}")
        described = _check_described(self.ext_id, reply.value)
        old = self.described.get("capabilities")
        if old is not None and old != described["capabilities"]:
            raise WasmLoadError(
                self.ext_id, f"protocols changed since load: {old} -> {described['capabilities']}"
            )
        self.described, self._guest = described, guest
        self.start_ms = (time.perf_counter() - began) * 1000

    # ------------------------------------------------------------ calls

    async def remote(self, method: str, params: Any, *, deadline: Any = DEFAULT) -> Any:
        """One call into the guest, within its budgets (``deadline`` is the process
        boundary's: here the guest's own time limit bounds every call)."""
        guest = self._guest
        if guest is None:
            raise HostUnavailableError(self.ext_id, self._down_reason)
        what = describe_call(method, params)
        try:
            reply, drawn = await asyncio.to_thread(guest.call, method, params, what)
        except GuestTrapError as exc:
            self._discard(guest, str(exc))
            raise
        if drawn:
            await self._record(what, drawn)
        if reply.error is not None:
            raise remote_error("WasmError", reply.error)
        return reply.value

    def _discard(self, guest: GuestInstance, reason: str) -> None:
        """Drop a trapped instance and have the supervisor restart the extension."""
        if guest is not self._guest:
            return
        self._guest = None
        self._down_reason = reason
        log.error("wasm extension %s: %s; it will be restarted", self.ext_id, reason)
        if self._on_status is not None and not self._closing:
            self._on_status(self.ext_id, reason)

    async def _record(self, what: str, drawn: list[dict[str, Any]]) -> None:
        """Journal what a call drew from the clock or randomness (replay feeds it back)."""
        if self._kctx is None or self.draws.replaying:
            return
        topic = f"{self.ext_id}.{DRAWS_TOPIC}"
        try:
            await self._kctx.emit(topic, {"call": what, "draws": drawn})
        except Exception:  # recording must not fail the call that was answered
            log.exception("wasm extension %s: could not record its draws", self.ext_id)


@functools.cache
def wasm_class(capabilities: tuple[str, ...]) -> type:
    """``WasmExtension`` plus the mixin of each described protocol (others are refused)."""
    unknown = [c for c in capabilities if c not in WASM_MIXINS]
    if unknown:
        offered = ", ".join(sorted(WASM_MIXINS))
        raise WasmLoadError(
            "(describe)", f"offers {', '.join(unknown)}; host ABI 1 serves only {offered}"
        )
    mixins = tuple(WASM_MIXINS[c] for c in capabilities)
    name = "Wasm" + "".join(c.removesuffix("Provider") for c in capabilities)
    return type(name, (WasmExtension, *mixins), {"__module__": WasmExtension.__module__})


def describe_call(method: str, params: Any) -> str:
    """How errors name a call: ``tool 'weather'``, ``on_llm_output()``."""
    name = params.get("name") if isinstance(params, dict) else None
    if method == HostMethod.CALL_TOOL:
        return f"tool {name!r}"
    if method == HostMethod.INVOKE:
        return f"{name}()"
    return f"{method}()"


def _check_described(ext_id: str, value: Any) -> dict[str, Any]:
    """The ``describe`` answer, checked enough that the mixins can rely on it."""
    if not isinstance(value, dict):
        raise WasmLoadError(ext_id, f"describe() answered {type(value).__name__}, not an object")
    capabilities = value.get("capabilities")
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise WasmLoadError(ext_id, "describe(): `capabilities` must be a list of names")
    unknown = [c for c in capabilities if c not in WASM_MIXINS]
    if unknown:
        raise WasmLoadError(
            ext_id, f"describe() offers {', '.join(unknown)}, which host ABI 1 does not serve"
        )
    for i, tool in enumerate(value.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise WasmLoadError(ext_id, f"describe(): tools[{i}] needs a `name`")
        if not isinstance(tool.get("params_json_schema"), dict):
            raise WasmLoadError(ext_id, f"describe(): tools[{i}] needs `params_json_schema`")
    for i, spec in enumerate(value.get("post_processors") or []):
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise WasmLoadError(ext_id, f"describe(): post_processors[{i}] needs a `name`")
    return value
