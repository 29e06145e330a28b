"""The extension system: the contract extensions implement (``contract``), the
library they may use (``sdk``), and the kernel's side — manifests, loading,
grants, the context each extension gets, and process isolation (``isolation``).

This door re-exports nothing: extensions import ``core.extensions.contract`` and
``core.extensions.sdk`` only, and importing either must stay light (ADR 0015).
"""

__all__: list[str] = []
