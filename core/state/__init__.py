"""Extension state: one kernel store behind ``get_state`` and friends (SPEC §9, ADR 0022).

``store`` is the async front (logging, counts, warnings); ``table`` the
SQLite table it runs in worker threads. Which session a call addresses is
decided by ``core.extensions.access.state_scope`` (shared with the plugin host).
"""

from core.state.store import WARN_FRACTION, StateStore
from core.state.table import EXTENSION_SCOPE, Limits

__all__ = ["EXTENSION_SCOPE", "WARN_FRACTION", "Limits", "StateStore"]
