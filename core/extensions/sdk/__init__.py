"""The extension library: helpers with no kernel state, importable by extensions.

Besides ``core.extensions.contract``, this package is the only part of
``core`` an extension may import (SPEC §1). It holds what both sides of the
boundary need, so the logic exists once: timezone resolution and time math
for schedules, the fire loop of a timer, the project's one backoff rule, a
SQLite store base and a store on the kernel's backend (SQLite or PostgreSQL, ``Store.at``),
both adapters over the kernel's storage layer (ADR 0080), a
``BaseExtension`` with no-op lifecycle, the line naming a missing optional dependency group
(``install_line``), the pairing of unknown senders every channel shares
(``Pairings``), the splitting of a long reply into a platform's pieces
(``split_text``), the showing of a streamed reply by editing one message
(``EditedStream``), the questions of a chat channel's setup
(``AllowListQuestions``, ``secret_field``), the reading of its settings
(``ChannelConfigError``, ``listed``) and the plumbing the chat channels
share around their client (``ChatChannel``), and the keeping of a file a
person sent (``keep_bytes``, ``keep_path``). The test helpers that run one
extension against a fake kernel live in ``core.extensions.sdk.testing``,
imported by tests only, so an extension never loads them. Importing it loads nothing heavy (no bus,
storage layer, pydantic, croniter or agents until a helper needs one), so a
plugin host stays small.
"""

from core.extensions.sdk.base import BaseExtension, NotInitializedError
from core.extensions.sdk.channel_config import ChannelConfigError, listed
from core.extensions.sdk.channel_setup import (
    AllowListQuestions,
    one_line,
    running_note,
    secret_field,
)
from core.extensions.sdk.chat_channel import ChannelSetup, ChatChannel, close_quietly
from core.extensions.sdk.consent import SIDE_EFFECTS_ATTR, side_effects
from core.extensions.sdk.due_loop import Clock, DueLoop
from core.extensions.sdk.edited_stream import EditedStream, EditedStreamChannel
from core.extensions.sdk.optional_groups import install_line, missing_group_reason
from core.extensions.sdk.pairing import (
    CODE_TTL_S,
    MAX_OPEN,
    WELCOME,
    Greeting,
    Pairings,
    admit_anywhere,
)
from core.extensions.sdk.received_files import (
    Refuse,
    inbox_path,
    keep_bytes,
    keep_path,
    mime_type_of,
)
from core.extensions.sdk.splitting import split_text, utf16_len
from core.extensions.sdk.sqlite_store import SQLiteStore, StoreNotOpenError
from core.extensions.sdk.store import Dialect, PostgresTarget, Store
from core.extensions.sdk.timemath import (
    CronError,
    check_cron,
    late_note,
    next_fire,
    next_interval,
    to_instant,
    utc_now,
    wall,
)
from core.extensions.sdk.timezones import UnknownTimezoneError, local_zone, resolve_zone
from core.runtime.backoff import Backoff
from core.storage.database import DuplicateKeyError

__all__ = [
    "CODE_TTL_S",
    "MAX_OPEN",
    "SIDE_EFFECTS_ATTR",
    "WELCOME",
    "AllowListQuestions",
    "Backoff",
    "BaseExtension",
    "ChannelConfigError",
    "ChannelSetup",
    "ChatChannel",
    "Clock",
    "CronError",
    "Dialect",
    "DueLoop",
    "DuplicateKeyError",
    "EditedStream",
    "EditedStreamChannel",
    "Greeting",
    "NotInitializedError",
    "Pairings",
    "PostgresTarget",
    "Refuse",
    "SQLiteStore",
    "Store",
    "StoreNotOpenError",
    "UnknownTimezoneError",
    "admit_anywhere",
    "check_cron",
    "close_quietly",
    "inbox_path",
    "install_line",
    "keep_bytes",
    "keep_path",
    "late_note",
    "listed",
    "local_zone",
    "mime_type_of",
    "missing_group_reason",
    "next_fire",
    "next_interval",
    "one_line",
    "resolve_zone",
    "running_note",
    "secret_field",
    "side_effects",
    "split_text",
    "to_instant",
    "utc_now",
    "utf16_len",
    "wall",
]
