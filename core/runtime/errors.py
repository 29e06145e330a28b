"""The one root of Hearth's own exceptions.

Each package keeps its own base (``EventBusError``, ``ManifestError``, …) with
its data as attributes; all of them derive from ``HearthError`` so a caller at
the edge (the command line, the supervisor, a test) can tell Hearth's own
refusals from a bug, and a new package cannot forget to. A base that also
means a built-in kind (``ValueError``, ``OSError``) keeps that kind as a
second base, so existing ``except ValueError`` handlers still catch it.
"""

from __future__ import annotations

__all__ = ["HearthError"]


class HearthError(Exception):
    """Base of every exception Hearth raises on purpose."""
