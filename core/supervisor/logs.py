"""Where the supervisor's and the kernel's lines go: a rotating file and stderr.

Kernel lines are already formatted by the kernel and are written verbatim;
the supervisor's own lines get the same ``<time> LEVEL name: message`` shape
under the logger name ``supervisor``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from logging.handlers import RotatingFileHandler
from pathlib import Path

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


def configure_logging(data_dir: Path, level: str) -> Callable[[], None]:
    """Attach the handlers; returns a function that detaches and closes them."""
    path = data_dir / LOG_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    formatter = _LineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [
        RotatingFileHandler(
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
