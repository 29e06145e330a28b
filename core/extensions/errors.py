"""Exceptions of the extension system; each carries the data it names."""

from __future__ import annotations

from core.runtime.errors import HearthError


class ExtensionError(HearthError):
    """Base of every extension-system error."""


class LifecycleTimeoutError(ExtensionError):
    """A lifecycle call (initialize/start/stop/destroy) did not finish in time."""

    def __init__(self, extension_id: str, method: str, seconds: float) -> None:
        super().__init__(f"{method}() timed out after {seconds:g} s")
        self.extension_id = extension_id
        self.method = method
        self.seconds = seconds


class PermissionDeniedError(ExtensionError):
    """An extension asked for something its manifest does not allow."""

    def __init__(self, extension_id: str, what: str) -> None:
        super().__init__(f"extension {extension_id!r} is not permitted to {what}")
        self.extension_id = extension_id
        self.what = what


class RateLimitedError(PermissionDeniedError):
    """A permitted call refused because the extension makes it too often."""

    def __init__(self, extension_id: str, action: str, per_minute: float) -> None:
        super().__init__(
            extension_id,
            f"{action} more than {per_minute:g} times a minute (settings `rate_limits`)",
        )
        self.action = action
        self.per_minute = per_minute


class SecretNotDeclaredError(PermissionDeniedError):
    """``get_secret`` for a name missing from the manifest's ``secrets``."""

    def __init__(self, extension_id: str, name: str) -> None:
        super().__init__(
            extension_id, f"read secret {name!r} (not declared in its manifest `secrets`)"
        )
        self.name = name


class NotAvailableError(ExtensionError):
    """A context member whose kernel service is not running (e.g. no agent yet)."""


class StateError(ExtensionError):
    """Base of the errors of extension state (``get_state`` and friends)."""


class StateScopeError(StateError):
    """Session-scoped state asked for where no turn is being served."""

    def __init__(self) -> None:
        super().__init__("no current session: call with scope='extension' outside a turn")


class StateLimitError(StateError):
    """A ``set_state`` refused because it would pass a size limit (a setting)."""

    def __init__(
        self, extension_id: str, key: str, what: str, size: int, limit: int, setting: str
    ) -> None:
        super().__init__(
            f"extension {extension_id!r}: set_state({key!r}) refused: {what} would hold "
            f"{size} bytes, over the limit of {limit} (settings `{setting}`)"
        )
        self.extension_id = extension_id
        self.key = key
        self.size = size
        self.limit = limit
        self.setting = setting
