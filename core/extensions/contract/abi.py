"""The host ABI's version: what the kernel offers an extension across a boundary.

One integer, raised when something an extension relies on across the process
boundary (the plugin host's RPC methods and payloads, the context calls) changes
in a way older extensions cannot follow; the WebAssembly imports carry it too
(``abi_version``, ADR 0085). The kernel sends it in the plugin
host's ``load``, the host answers it in its ready reply, and a manifest's
``requires_abi`` (a version specifier such as ``">=1,<2"``) is checked against
it before any of the extension's code runs (ADR 0086).
"""

from __future__ import annotations

HOST_ABI_VERSION = 1
