"""Errors of the process boundary; each names the extension and what failed."""

from __future__ import annotations

from typing import Any

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


class HookResultError(IsolationError):
    """A plugin host answered a hook call with something that hook does not return."""

    def __init__(self, extension_id: str, hook: str, what: str) -> None:
        super().__init__(f"{hook} of isolated extension {extension_id!r} returned {what}")
        self.extension_id = extension_id
        self.hook = hook


class ConfinementError(IsolationError):
    """Confinement is required (or needed by the manifest) but not available."""


class QuotaExceededError(IsolationError):
    """An isolated extension's data dir holds more than ``isolation.data_quota_mb``."""

    def __init__(self, extension_id: str, data_dir: str, used_mb: float, quota_mb: int) -> None:
        super().__init__(
            f"data dir {data_dir} of extension {extension_id!r} holds {used_mb:.1f} MB, over "
            f"isolation.data_quota_mb ({quota_mb}); free space there to run it again"
        )
        self.extension_id = extension_id
        self.data_dir = data_dir
        self.used_mb = used_mb
        self.quota_mb = quota_mb


class RemoteError(IsolationError):
    """An exception raised on the other side; ``type_name`` is its class name.

    ``remote_error`` returns a subclass named after the remote class, so a
    one-line reason reads ``ValueError: boom`` rather than ``RemoteError: …``.
    """

    type_name = "RemoteError"


_CLASSES: dict[str, type[RemoteError]] = {}
MAX_REMOTE_CLASSES = 256  # a hostile host must not make the kernel mint classes forever


def error_to_wire(exc: BaseException, message: str) -> dict[str, Any]:
    """``{type, message}``; a refusal also carries its fields, to be rebuilt as itself."""
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    if isinstance(exc, PermissionDeniedError):
        error["denied"] = {"extension_id": exc.extension_id, "what": exc.what}
    return error


def remote_error(type_name: str, message: str, denied: Any = None) -> Exception:
    """Rebuild an exception that crossed the channel.

    A kernel refusal becomes a real ``PermissionDeniedError`` with the kernel's
    message, so the extension sees the same exception in both modes.
    """
    if isinstance(denied, dict):
        return PermissionDeniedError(str(denied.get("extension_id")), str(denied.get("what")))
    name = type_name if type_name.isidentifier() and len(type_name) <= 80 else "RemoteError"
    cls = _CLASSES.get(name)
    if cls is None and len(_CLASSES) >= MAX_REMOTE_CLASSES:
        cls = RemoteError
    elif cls is None:
        cls = type(name, (RemoteError,), {"type_name": name, "__module__": __name__})
        _CLASSES[name] = cls
    return cls(message)
