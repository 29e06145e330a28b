"""WebAssembly extensions (``isolation: wasm``, ADR 0085): a module in wasmtime,
budgeted per call (fuel, time, memory), with no file, network, clock or
randomness unless granted, speaking the process boundary's messages as JSON
(``abi``). ``WasmExtension`` stands for the extension in the kernel.

The door is lazy: importing it does not load wasmtime until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.isolation.wasm.abi import (
        HOST_ABI_VERSION as HOST_ABI_VERSION,
        Reply as Reply,
        encode_request as encode_request,
        method_export as method_export,
    )
    from core.extensions.isolation.wasm.draws import (
        DrawLog as DrawLog,
        ReplayExhaustedError as ReplayExhaustedError,
    )
    from core.extensions.isolation.wasm.errors import (
        BudgetExceededError as BudgetExceededError,
        GuestTrapError as GuestTrapError,
        WasmLoadError as WasmLoadError,
    )
    from core.extensions.isolation.wasm.extension import (
        WasmExtension as WasmExtension,
        describe_call as describe_call,
        wasm_class as wasm_class,
    )
    from core.extensions.isolation.wasm.runtime import (
        GuestInstance as GuestInstance,
        WasmBudget as WasmBudget,
        shared_engine as shared_engine,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
