"""What every process of Hearth needs from its surroundings: the data
directory and its safe file handling, secrets, logging, the supervisor's
restart files, the local model's files and the keeper of its server, and two
small asyncio/import helpers. The door is lazy
(PEP 562) so the plugin host, which uses only light parts, loads nothing
heavy (ADR 0015).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.runtime.backoff import (
        Backoff as Backoff,
        backoff_delay as backoff_delay,
    )
    from core.runtime.datadir import (
        CODE_SNAPSHOTS_DIR as CODE_SNAPSHOTS_DIR,
        JOURNAL_FILE as JOURNAL_FILE,
        KERNEL_DATA_NAMES as KERNEL_DATA_NAMES,
        PROJECT_ROOT as PROJECT_ROOT,
        RESERVED_IDS as RESERVED_IDS,
        SCHEDULES_FILE as SCHEDULES_FILE,
        SESSIONS_FILE as SESSIONS_FILE,
        STATE_FILE as STATE_FILE,
        SymlinkRefusedError as SymlinkRefusedError,
        create_private as create_private,
        extension_data_dir as extension_data_dir,
        make_private as make_private,
        migrate_extension_data as migrate_extension_data,
        open_nofollow as open_nofollow,
        refuse_symlinks as refuse_symlinks,
    )
    from core.runtime.errors import HearthError as HearthError
    from core.runtime.heap import limit_arenas as limit_arenas
    from core.runtime.lazy_door import lazy_door as lazy_door
    from core.runtime.lifecycle import (
        EXIT_CLEAN as EXIT_CLEAN,
        RESTART_REQUEST_FILE as RESTART_REQUEST_FILE,
        SUPERVISED_ENV as SUPERVISED_ENV,
        is_supervised as is_supervised,
        restart_request_path as restart_request_path,
        take_restart_request as take_restart_request,
        write_restart_request as write_restart_request,
    )
    from core.runtime.local_model import (
        RELEASE as RELEASE,
        LocalModelFiles as LocalModelFiles,
        LocalModelRelease as LocalModelRelease,
        default_home as default_home,
        file_sha256 as file_sha256,
        pinned as pinned,
        server_argv as server_argv,
        server_version_for as server_version_for,
    )
    from core.runtime.local_server import (
        LOCAL_SERVER_LOG as LOCAL_SERVER_LOG,
        LocalServerKeeper as LocalServerKeeper,
    )
    from core.runtime.logs import (
        REDACTOR as REDACTOR,
        TEXT_FORMAT as TEXT_FORMAT,
        configure_logging as configure_logging,
        escape_control as escape_control,
        guard_extension_logger as guard_extension_logger,
    )
    from core.runtime.resumed import Resumed as Resumed
    from core.runtime.secrets import (
        SecretNameError as SecretNameError,
        env_file_path as env_file_path,
        load_secrets as load_secrets,
        save_secrets as save_secrets,
        secret_file_names as secret_file_names,
    )

__getattr__, __dir__ = lazy_door(__name__, globals())
