"""Give freed heap memory back to the system after a bulk load.

Loading 100,000 vectors or building the ONNX model frees tens of megabytes of
short-lived objects; glibc keeps such memory for later ``malloc`` calls, so it
would stay in the process's resident size for good. ``malloc_trim(0)`` returns
the free pages. Elsewhere (musl, macOS) there is nothing to call and nothing
happens.
"""

from __future__ import annotations

import ctypes


def return_freed_memory() -> None:
    """``malloc_trim(0)`` where the C library has it.

    The process's own symbols are asked (``CDLL(None)``), not a library found by
    name: ``find_library`` runs ``ldconfig``, which a sandboxed host may not have.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)
