"""Where the supervisor's and the kernel's lines go: a rotating file and stderr.

Kernel lines are already formatted by the kernel and are written verbatim;
the supervisor's own lines get the same ``<time> LEVEL name: message`` shape
under the logger name ``supervisor``. The file is opened without following
symbolic links: a link planted in ``logs/`` would otherwise make the daemon
append every line to whatever file it points at.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from collections.abc import Callable
from logging.handlers import RotatingFileHandler
from pathlib import Path

from core.runtime import open_nofollow

SUPERVISOR_LOGGER = "supervisor"
KERNEL_OUTPUT_LOGGER = "supervisor.kernel"
LOG_FILE = Path("logs") / "kernel.log"
MAX_LOG_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 5


class _LineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        if record.name == KERNEL_OUTPUT_LOGGER:
            return record.getMessage()
        return super().format(record)


class NoFollowRotatingFileHandler(RotatingFileHandler):
    """``RotatingFileHandler`` that refuses a symlinked log file or ``logs/`` directory
    (``SymlinkRefusedError``); rotation renames links, it never follows them."""

    def _open(self) -> io.TextIOWrapper:
        path = Path(self.baseFilename)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        fd = open_nofollow(path, flags, below=path.parent.parent)
        return io.TextIOWrapper(
            io.FileIO(fd, "a"), encoding=self.encoding, errors=self.errors, write_through=True
        )


def configure_logging(data_dir: Path, level: str) -> Callable[[], None]:
    """Attach the handlers; returns a function that detaches and closes them.

    Raises ``SymlinkRefusedError`` when the log file or its directory is a link.
    """
    path = data_dir / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    formatter = _LineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [
        NoFollowRotatingFileHandler(
            path, maxBytes=MAX_LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        ),
        logging.StreamHandler(sys.stderr),
    ]
    own = logging.getLogger(SUPERVISOR_LOGGER)
    own.setLevel(level.upper())
    own.propagate = False
    # Kernel output is never filtered by the supervisor's level.
    logging.getLogger(KERNEL_OUTPUT_LOGGER).setLevel(logging.DEBUG)
    for handler in handlers:
        handler.setFormatter(formatter)
        own.addHandler(handler)

    def close() -> None:
        for handler in handlers:
            own.removeHandler(handler)
            handler.close()

    return close
