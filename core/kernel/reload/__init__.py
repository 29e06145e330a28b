"""Extensions coming and going in a running kernel: registration, hot reload, and the file
watcher that triggers it.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.reload.control import RELOAD_SUBSCRIBER, ReloadControl
    from core.kernel.reload.registrations import before_extension_code, reconcile_registrations
    from core.kernel.reload.reloader import ExtensionReloader, ReloadError, ReloadReport
    from core.kernel.reload.watch import changed_extensions, watch_extensions

__all__ = [
    "RELOAD_SUBSCRIBER",
    "ExtensionReloader",
    "ReloadControl",
    "ReloadError",
    "ReloadReport",
    "before_extension_code",
    "changed_extensions",
    "reconcile_registrations",
    "watch_extensions",
]

_HOMES = {
    "ExtensionReloader": "reloader",
    "RELOAD_SUBSCRIBER": "control",
    "ReloadControl": "control",
    "ReloadError": "reloader",
    "ReloadReport": "reloader",
    "before_extension_code": "registrations",
    "changed_extensions": "watch",
    "reconcile_registrations": "registrations",
    "watch_extensions": "watch",
}

__getattr__, __dir__ = lazy_door("core.kernel.reload", globals(), _HOMES, __all__)
