"""Errors of the WebAssembly boundary; each names the extension, the call and the cause."""

from __future__ import annotations

from core.extensions.isolation.protocol.errors import IsolationError

__all__ = ["BudgetExceededError", "GuestTrapError", "WasmLoadError"]


class WasmLoadError(IsolationError):
    """A module that cannot be loaded: unreadable, invalid, asking for an import
    Hearth does not give it, or built for another ABI."""

    def __init__(self, extension_id: str, message: str) -> None:
        super().__init__(f"wasm extension {extension_id!r}: {message}")
        self.extension_id = extension_id


class GuestTrapError(IsolationError):
    """The module trapped (or answered garbage) during a call; its instance is
    discarded and the extension restarted."""

    def __init__(self, extension_id: str, call: str, cause: str) -> None:
        super().__init__(f"{call} of wasm extension {extension_id!r} trapped: {cause}")
        self.extension_id = extension_id
        self.call = call
        self.cause = cause


class BudgetExceededError(GuestTrapError):
    """A call was cut off at one of its budgets (fuel, time, memory)."""

    def __init__(self, extension_id: str, call: str, limit: str) -> None:
        IsolationError.__init__(
            self, f"{call} of wasm extension {extension_id!r} was stopped: it hit its {limit}"
        )
        self.extension_id = extension_id
        self.call = call
        self.cause = limit
        self.limit = limit
