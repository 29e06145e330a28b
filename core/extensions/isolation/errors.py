"""Errors of the process boundary; each names the extension and what failed."""

from __future__ import annotations

from core.extensions.errors import ExtensionError, PermissionDeniedError


class IsolationError(ExtensionError):
    """Base of every error raised by the plugin-host machinery."""


class PeerClosedError(IsolationError):
    """The other side of the RPC channel went away while a call was pending."""


class CallTimeoutError(IsolationError, TimeoutError):
    """A call across the boundary did not answer within its deadline."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"{method} did not answer within {seconds:g} s")
        self.method = method
        self.seconds = seconds


class HostUnavailableError(IsolationError):
    """The extension's plugin host is not running (it died or is restarting)."""

    def __init__(self, extension_id: str, reason: str) -> None:
        super().__init__(f"isolated extension {extension_id!r} is not running: {reason}")
        self.extension_id = extension_id
        self.reason = reason


class ConfinementError(IsolationError):
    """Confinement is required (or needed by the manifest) but not available."""


class RemoteError(IsolationError):
    """An exception raised on the other side; ``type_name`` is its class name.

    ``remote_error`` returns a subclass named after the remote class, so a
    one-line reason reads ``ValueError: boom`` rather than ``RemoteError: …``.
    """

    type_name = "RemoteError"


class RemotePermissionDeniedError(RemoteError, PermissionDeniedError):
    """The kernel refused a context call; the extension sees the kernel's message."""

    type_name = "PermissionDeniedError"

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.extension_id = ""
        self.what = message


_PERMISSION_TYPES = {"PermissionDeniedError", "SecretNotDeclaredError"}
_CLASSES: dict[str, type[RemoteError]] = {}


def remote_error(type_name: str, message: str) -> RemoteError:
    """Rebuild an exception that crossed the channel as ``{type, message}``."""
    if type_name in _PERMISSION_TYPES:
        return RemotePermissionDeniedError(message)
    name = type_name if type_name.isidentifier() else "RemoteError"
    cls = _CLASSES.get(name)
    if cls is None:
        cls = type(name, (RemoteError,), {"type_name": name, "__module__": __name__})
        _CLASSES[name] = cls
    return cls(message)
