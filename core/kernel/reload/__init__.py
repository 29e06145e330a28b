"""Extensions coming and going in a running kernel: registration, hot reload, and the file
watcher that triggers it.

The door is lazy (``lazy_door``): a submodule is imported when one of
its names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.kernel.reload.control import (
        RELOAD_SUBSCRIBER as RELOAD_SUBSCRIBER,
        ReloadControl as ReloadControl,
    )
    from core.kernel.reload.registrations import (
        before_extension_code as before_extension_code,
        reconcile_registrations as reconcile_registrations,
    )
    from core.kernel.reload.reloader import (
        ExtensionReloader as ExtensionReloader,
        ReloadError as ReloadError,
        ReloadReport as ReloadReport,
    )
    from core.kernel.reload.watch import (
        changed_extensions as changed_extensions,
        watch_extensions as watch_extensions,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
