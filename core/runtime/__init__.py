"""What every process of Hearth needs from its surroundings: the data
directory and its safe file handling, secrets, logging, the supervisor's
restart files, and two small asyncio/import helpers. The door is lazy
(PEP 562) so the plugin host, which uses only light parts, loads nothing
heavy (ADR 0015).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.runtime.backoff import Backoff, backoff_delay
    from core.runtime.datadir import (
        CODE_SNAPSHOTS_DIR,
        JOURNAL_FILE,
        KERNEL_DATA_NAMES,
        RESERVED_IDS,
        SCHEDULES_FILE,
        SESSIONS_FILE,
        STATE_FILE,
        SymlinkRefusedError,
        create_private,
        extension_data_dir,
        extension_storage,
        make_private,
        migrate_extension_data,
        open_nofollow,
        refuse_symlinks,
    )
    from core.runtime.errors import HearthError
    from core.runtime.lazy_door import lazy_door
    from core.runtime.lifecycle import (
        EXIT_CLEAN,
        RESTART_REQUEST_FILE,
        SUPERVISED_ENV,
        is_supervised,
        restart_request_path,
        take_restart_request,
        write_restart_request,
    )
    from core.runtime.logs import (
        REDACTOR,
        TEXT_FORMAT,
        configure_logging,
        escape_control,
        guard_extension_logger,
    )
    from core.runtime.resumed import Resumed
    from core.runtime.secrets import (
        SecretNameError,
        env_file_path,
        load_secrets,
        save_secrets,
        secret_file_names,
    )

__all__ = [
    "CODE_SNAPSHOTS_DIR",
    "EXIT_CLEAN",
    "JOURNAL_FILE",
    "KERNEL_DATA_NAMES",
    "REDACTOR",
    "RESERVED_IDS",
    "RESTART_REQUEST_FILE",
    "SCHEDULES_FILE",
    "SESSIONS_FILE",
    "STATE_FILE",
    "SUPERVISED_ENV",
    "TEXT_FORMAT",
    "Backoff",
    "HearthError",
    "Resumed",
    "SecretNameError",
    "SymlinkRefusedError",
    "backoff_delay",
    "configure_logging",
    "create_private",
    "env_file_path",
    "escape_control",
    "extension_data_dir",
    "extension_storage",
    "guard_extension_logger",
    "is_supervised",
    "lazy_door",
    "load_secrets",
    "make_private",
    "migrate_extension_data",
    "open_nofollow",
    "refuse_symlinks",
    "restart_request_path",
    "save_secrets",
    "secret_file_names",
    "take_restart_request",
    "write_restart_request",
]

_HOMES = {
    "Backoff": "backoff",
    "backoff_delay": "backoff",
    "HearthError": "errors",
    "EXIT_CLEAN": "lifecycle",
    "CODE_SNAPSHOTS_DIR": "datadir",
    "JOURNAL_FILE": "datadir",
    "KERNEL_DATA_NAMES": "datadir",
    "SCHEDULES_FILE": "datadir",
    "SESSIONS_FILE": "datadir",
    "STATE_FILE": "datadir",
    "REDACTOR": "logs",
    "RESERVED_IDS": "datadir",
    "RESTART_REQUEST_FILE": "lifecycle",
    "Resumed": "resumed",
    "SUPERVISED_ENV": "lifecycle",
    "SecretNameError": "secrets",
    "SymlinkRefusedError": "datadir",
    "TEXT_FORMAT": "logs",
    "configure_logging": "logs",
    "create_private": "datadir",
    "env_file_path": "secrets",
    "escape_control": "logs",
    "extension_data_dir": "datadir",
    "extension_storage": "datadir",
    "guard_extension_logger": "logs",
    "is_supervised": "lifecycle",
    "lazy_door": "lazy_door",
    "load_secrets": "secrets",
    "make_private": "datadir",
    "migrate_extension_data": "datadir",
    "open_nofollow": "datadir",
    "refuse_symlinks": "datadir",
    "restart_request_path": "lifecycle",
    "save_secrets": "secrets",
    "secret_file_names": "secrets",
    "take_restart_request": "lifecycle",
    "write_restart_request": "lifecycle",
}

__getattr__, __dir__ = lazy_door("core.runtime", globals(), _HOMES, __all__)
