"""The guest ABI of WebAssembly extensions, version ``HOST_ABI_VERSION`` (ADR 0085).

JSON in, JSON out, through the guest's linear memory — the same messages the
process plugin host gets (``isolation.protocol.messages``), so one extension
contract has two boundaries. The guest exports:

- ``memory``; ``hearth_alloc(len: i32) -> i32``: room for ``len`` bytes the host
  writes the request into;
- ``hearth_abi_version() -> i32``: the ABI it was built for (checked at load);
- ``hearth_<method>(ptr: i32, len: i32) -> i64`` for each host method it serves
  (``describe``, ``call_tool``, ``invoke``): the request's UTF-8 JSON at
  ``ptr``; the answer's address and length packed as ``ptr << 32 | len``, the
  answer being ``{"ok": value}`` or ``{"error": "message"}``.

It may import, from module ``hearth``, ``abi_version() -> i32`` and
``log(ptr, len)``; ``clock_ms() -> i64`` and ``random_fill(ptr, len)`` only when
the manifest asks for them (``wasm.clock``, ``wasm.random``) and the grant says
so. Nothing else: no WASI, so no file, socket or environment; a module that
imports anything else is refused at load, naming the import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from core.extensions.contract import HOST_ABI_VERSION

__all__ = [
    "ABI_EXPORT",
    "ALLOC_EXPORT",
    "GRANTED_IMPORTS",
    "HOST_ABI_VERSION",
    "IMPORT_MODULE",
    "MAX_REPLY_BYTES",
    "PLAIN_IMPORTS",
    "Reply",
    "encode_request",
    "method_export",
    "unpack",
]

IMPORT_MODULE: Final = "hearth"
ALLOC_EXPORT: Final = "hearth_alloc"
ABI_EXPORT: Final = "hearth_abi_version"
MAX_REPLY_BYTES: Final = 4 * 1024 * 1024  # an answer larger than this is refused
# imports every module may use, and those that need the manifest's ask and the grant
PLAIN_IMPORTS: Final = ("abi_version", "log")
GRANTED_IMPORTS: Final = {"clock_ms": "clock", "random_fill": "random"}


def method_export(method: str) -> str:
    """The export serving host method ``method``: ``call_tool`` -> ``hearth_call_tool``."""
    return f"hearth_{method}"


def encode_request(params: Any) -> bytes:
    """The request bytes: ``params`` with ``abi_version`` beside it, compact UTF-8 JSON."""
    return json.dumps(
        {"abi_version": HOST_ABI_VERSION, "params": params},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()


def unpack(packed: int) -> tuple[int, int]:
    """``(ptr, len)`` from the i64 a ``hearth_<method>`` export returns."""
    value = packed & 0xFFFF_FFFF_FFFF_FFFF
    return value >> 32, value & 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class Reply:
    """A guest's answer: ``value`` on success, else ``error`` (its own words)."""

    value: Any = None
    error: str | None = None

    @classmethod
    def parse(cls, data: bytes) -> Reply:
        """Decode strictly: JSON, one object with exactly ``ok`` or ``error``."""
        try:
            answer = json.loads(data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"answer is not UTF-8 JSON ({exc})") from None
        if not isinstance(answer, dict) or len(answer) != 1:
            raise ValueError('answer must be an object {"ok": ...} or {"error": "..."}')
        if "ok" in answer:
            return cls(value=answer["ok"])
        if "error" in answer:
            return cls(error=str(answer["error"]))
        raise ValueError(f'answer has neither "ok" nor "error" (keys: {", ".join(answer)})')
