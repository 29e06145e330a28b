"""One wasmtime engine for every WebAssembly extension, and one guest instance per extension.

Budgets (ADR 0085): each call gets ``fuel`` instructions (deterministic: the
same input is cut at the same point) and a wall-clock limit enforced by epoch
interruption — a ticker thread advances the engine's epoch while a call runs,
so a guest blocking in a long loop is interrupted even when fuel is generous.
The store's memory limit makes ``memory.grow`` fail past ``memory_mb``.
Imports are checked before instantiation: only the ``hearth`` functions the
manifest asked for and was granted exist (``abi.py``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import wasmtime

from core.extensions.isolation.wasm.abi import (
    ABI_EXPORT,
    ALLOC_EXPORT,
    GRANTED_IMPORTS,
    HOST_ABI_VERSION,
    IMPORT_MODULE,
    MAX_REPLY_BYTES,
    PLAIN_IMPORTS,
    Reply,
    encode_request,
    method_export,
    unpack,
)
from core.extensions.isolation.wasm.draws import DrawLog
from core.extensions.isolation.wasm.errors import (
    BudgetExceededError,
    GuestTrapError,
    WasmLoadError,
)

__all__ = ["TICK_S", "GuestInstance", "WasmBudget", "WasmEngine", "shared_engine"]

TICK_S: Final = 0.005  # epoch granularity: a time limit is honoured to within this
PAGE: Final = 65536
MAX_LOG_BYTES: Final = 4096  # one guest log line


@dataclass(frozen=True, slots=True)
class WasmBudget:
    """What one call may use, and which nondeterministic imports exist."""

    fuel: int
    time_limit_ms: int
    memory_mb: int
    clock: bool = False
    random: bool = False


class _EpochTicker:
    """Advances the engine's epoch every ``TICK_S`` while at least one call runs."""

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._active = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def enter(self) -> None:
        with self._cond:
            self._active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wasm-epoch", daemon=True)
                self._thread.start()
            self._cond.notify()

    def leave(self) -> None:
        with self._cond:
            self._active -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._active == 0:
                    self._cond.wait()
            time.sleep(TICK_S)
            self._engine.increment_epoch()


class WasmEngine:
    """The engine (fuel and epochs on), its ticker, and compiled modules by digest."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.consume_fuel = True
        config.epoch_interruption = True
        self.engine = wasmtime.Engine(config)
        self.ticker = _EpochTicker(self.engine)
        self._modules: dict[str, wasmtime.Module] = {}
        self._lock = threading.Lock()

    def compile(self, ext_id: str, source: bytes) -> wasmtime.Module:
        """The module from ``.wasm`` bytes or WAT text, compiled once per content."""
        key = hashlib.sha256(source).hexdigest()
        with self._lock:
            module = self._modules.get(key)
        if module is None:
            try:
                module = wasmtime.Module(self.engine, source)
            except wasmtime.WasmtimeError as exc:
                raise WasmLoadError(ext_id, f"not a valid module: {_first_line(exc)}") from None
            with self._lock:
                self._modules[key] = module
        return module


_SHARED: list[WasmEngine] = []


def shared_engine() -> WasmEngine:
    """The process's one engine (created on first use: importing costs nothing)."""
    if not _SHARED:
        _SHARED.append(WasmEngine())
    return _SHARED[0]


class GuestInstance:
    """One instance of an extension's module in its own store, with its budgets.

    Not thread-safe: the owner serializes calls. ``call`` is synchronous (the
    owner runs it in a worker thread) and raises ``GuestTrapError`` (or its
    ``BudgetExceededError``) after which this instance must be discarded.
    """

    def __init__(
        self,
        ext_id: str,
        engine: WasmEngine,
        module: wasmtime.Module,
        budget: WasmBudget,
        draws: DrawLog,
        log: logging.Logger,
    ) -> None:
        self.ext_id = ext_id
        self.budget = budget
        self._engine = engine
        self._draws = draws
        self._log = log
        self._call_lock = threading.Lock()
        self.store = wasmtime.Store(engine.engine)
        self.store.set_limits(memory_size=budget.memory_mb * 1024 * 1024)
        linker = wasmtime.Linker(engine.engine)
        self._define_imports(linker, module)
        self._arm()
        try:
            instance = linker.instantiate(self.store, module)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise WasmLoadError(ext_id, f"cannot instantiate: {_cause(exc)}") from None
        finally:
            self._engine.ticker.leave()
        exports = instance.exports(self.store)
        memory, alloc = exports.get("memory"), exports.get(ALLOC_EXPORT)
        if not isinstance(memory, wasmtime.Memory):
            raise WasmLoadError(ext_id, "exports no `memory`")
        if not isinstance(alloc, wasmtime.Func):
            raise WasmLoadError(ext_id, f"exports no `{ALLOC_EXPORT}(len: i32) -> i32`")
        self.memory, self._alloc = memory, alloc
        self._exports = exports
        self._check_abi(exports.get(ABI_EXPORT))

    def serves(self, method: str) -> bool:
        return isinstance(self._exports.get(method_export(method)), wasmtime.Func)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory.data_len(self.store))

    # ------------------------------------------------------------ calls

    def call(self, method: str, params: Any, what: str) -> tuple[Reply, list[dict[str, Any]]]:
        """Send ``params`` to ``hearth_<method>`` within the budgets; ``what`` names the
        call in errors (``tool 'weather'``). Returns the answer and what the call drew
        (clock, randomness). Calls are serialized: a store runs one at a time."""
        with self._call_lock:
            reply = self._call(method, params, what)
            return reply, self._draws.take()

    def _call(self, method: str, params: Any, what: str) -> Reply:
        func = self._exports.get(method_export(method))
        if not isinstance(func, wasmtime.Func):
            raise GuestTrapError(self.ext_id, what, f"exports no `{method_export(method)}`")
        request = encode_request(params)
        self._arm()
        try:
            ptr = self._alloc(self.store, len(request))
            if not isinstance(ptr, int) or ptr <= 0:
                raise self._cut(what, f"{ALLOC_EXPORT}({len(request)}) returned {ptr!r}")
            self.memory.write(self.store, request, ptr)
            packed = func(self.store, ptr, len(request))
            if not isinstance(packed, int):
                raise GuestTrapError(self.ext_id, what, f"answered {packed!r}, not an i64")
            start, length = unpack(packed)
            if length > MAX_REPLY_BYTES:
                raise GuestTrapError(self.ext_id, what, f"answer of {length} bytes is too large")
            data = bytes(self.memory.read(self.store, start, start + length))
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise self._cut(what, _cause(exc)) from None
        except (IndexError, ValueError) as exc:  # an answer outside its memory
            raise GuestTrapError(self.ext_id, what, f"bad answer address: {exc}") from None
        finally:
            self._engine.ticker.leave()
        try:
            return Reply.parse(data)
        except ValueError as exc:
            raise GuestTrapError(self.ext_id, what, str(exc)) from None

    def _arm(self) -> None:
        """Fill the fuel tank and set the epoch deadline; the ticker runs until ``leave``."""
        self.store.set_fuel(self.budget.fuel)
        ticks = max(1, -(-self.budget.time_limit_ms // int(TICK_S * 1000)))
        self.store.set_epoch_deadline(ticks)
        self._engine.ticker.enter()

    def _cut(self, what: str, cause: str) -> GuestTrapError:
        """The error for a call that failed: the budget it hit, else the trap."""
        if self.store.get_fuel() == 0:
            return BudgetExceededError(
                self.ext_id, what, f"fuel budget (wasm.fuel: {self.budget.fuel} instructions)"
            )
        if cause == "wasm trap: interrupt":
            return BudgetExceededError(
                self.ext_id, what, f"time limit (wasm.time_limit_ms: {self.budget.time_limit_ms})"
            )
        cap = self.budget.memory_mb * 1024 * 1024
        # a failed memory.grow only returns -1 (wasmtime tells no more): a trap with the
        # memory within a quarter of the cap is the guest failing to get more
        if self.memory_bytes + max(PAGE, cap // 4) > cap:
            return BudgetExceededError(
                self.ext_id, what, f"memory cap (wasm.memory_mb: {self.budget.memory_mb})"
            )
        return GuestTrapError(self.ext_id, what, cause)

    # ------------------------------------------------------------ imports

    def _check_abi(self, export: Any) -> None:
        if not isinstance(export, wasmtime.Func):
            raise WasmLoadError(self.ext_id, f"exports no `{ABI_EXPORT}() -> i32`")
        self._arm()
        try:
            version = export(self.store)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            raise WasmLoadError(self.ext_id, f"{ABI_EXPORT}() trapped: {_cause(exc)}") from None
        finally:
            self._engine.ticker.leave()
        if version != HOST_ABI_VERSION:
            raise WasmLoadError(
                self.ext_id,
                f"built for host ABI {version!r}; this Hearth offers ABI {HOST_ABI_VERSION}",
            )

    def _define_imports(self, linker: wasmtime.Linker, module: wasmtime.Module) -> None:
        """Refuse an import Hearth does not give; define those it does."""
        granted = {"clock": self.budget.clock, "random": self.budget.random}
        for imp in module.imports:
            where = f"{imp.module}.{imp.name}"
            if imp.module != IMPORT_MODULE:
                raise WasmLoadError(self.ext_id, f"imports {where}: {_refusal(imp.module)}")
            needs = GRANTED_IMPORTS.get(str(imp.name))
            if imp.name not in PLAIN_IMPORTS and needs is None:
                raise WasmLoadError(
                    self.ext_id, f"imports {where}, which host ABI {HOST_ABI_VERSION} lacks"
                )
            if needs is not None and not granted[needs]:
                raise WasmLoadError(
                    self.ext_id,
                    f"imports {where}: declare `wasm: {{{needs}: true}}` in its manifest "
                    "(the user is then asked to grant it)",
                )
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
        funcs: list[tuple[str, wasmtime.FuncType, Callable[..., Any]]] = [
            ("abi_version", wasmtime.FuncType([], [i32]), lambda: HOST_ABI_VERSION),
            ("log", wasmtime.FuncType([i32, i32], []), self._guest_log),
        ]
        if self.budget.clock:
            funcs.append(("clock_ms", wasmtime.FuncType([], [i64]), self._draws.clock_ms))
        if self.budget.random:
            funcs.append(("random_fill", wasmtime.FuncType([i32, i32], []), self._random_fill))
        for name, ftype, impl in funcs:
            access = name in ("log", "random_fill")
            linker.define_func(IMPORT_MODULE, name, ftype, impl, access_caller=access)

    def _guest_log(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        data = self._guest_memory(caller).read(caller, ptr, ptr + min(length, MAX_LOG_BYTES))
        self._log.info("%s", bytes(data).decode(errors="replace"))

    def _random_fill(self, caller: wasmtime.Caller, ptr: int, length: int) -> None:
        self._guest_memory(caller).write(caller, self._draws.random_bytes(length), ptr)

    @staticmethod
    def _guest_memory(caller: wasmtime.Caller) -> wasmtime.Memory:
        memory = caller.get("memory")
        if not isinstance(memory, wasmtime.Memory):
            raise wasmtime.WasmtimeError("the module exports no memory")
        return memory


def _refusal(module: str) -> str:
    if module.startswith("wasi"):
        return (
            "WASI is not offered: wasm extensions get no files, sockets, environment, "
            "clock or randomness except through `hearth` imports"
        )
    return f"no module {module!r} is offered (only {IMPORT_MODULE!r})"


def _cause(exc: BaseException) -> str:
    """The trap's one-line cause (``wasm trap: unreachable``), without wasmtime's backtrace."""
    lines = [line.strip() for line in str(exc).splitlines()]
    if "Caused by:" in lines:
        after = lines[lines.index("Caused by:") + 1 :]
        return next((line for line in after if line), _first_line(exc))
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
