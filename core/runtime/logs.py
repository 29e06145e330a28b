"""Process-wide logging: one line per record on stderr, secrets redacted.

Format ``time level logger: message`` (extensions log as ``ext.<id>``), or
one JSON object per line with ``logging.format: json``. In the interactive
terminal (``log_file`` given) records go to that file instead, and only
WARNING and above reach the terminal, written through whatever ``sys.stderr``
is at that moment, so prompt_toolkit's ``patch_stdout`` prints them above
the prompt without breaking the line being typed. Values of every
secret the kernel knows are replaced by ``***`` before a record is written.
Text an extension logs has its control characters escaped
(``ExtensionLogEscaper``), so it cannot forge a line of its own.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import Iterable
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, TextIO

from core.runtime.datadir import open_nofollow

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SecretRedactor(logging.Filter):
    """Replaces known secret values in a record's final message."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()

    def add(self, values: Iterable[str]) -> None:
        self._secrets.update(v for v in values if v and len(v) >= 4)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            message = self.redact(record.getMessage())
            record.msg, record.args = message, None
            if record.exc_info:
                record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
                record.exc_info = None
        return True


def _escape_table() -> dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]}
    table.update({0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})
    del table[0x09]  # a tab cannot start a line
    return table


_ESCAPES = _escape_table()


def escape_control(text: str) -> str:
    """``text`` with newlines, ESC and every other C0/C1 control character escaped
    (``\\n``, ``\\x1b``): one log call can only ever write one line."""
    return text.translate(_ESCAPES)


class ExtensionLogEscaper(logging.Filter):
    """On an ``ext.<id>`` logger: formats the message with its args, then escapes it.

    Formatting first matters: ``logger.warning("%s", "ok\\nCRITICAL ...")``
    would otherwise carry the forged line in ``args``.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # bad format args: show them rather than fail the caller
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = escape_control(message), None
        return True


ESCAPER = ExtensionLogEscaper()


def guard_extension_logger(logger: logging.Logger) -> logging.Logger:
    """Install ``ESCAPER`` on an extension's logger once; returns the logger."""
    if ESCAPER not in logger.filters:
        logger.addFilter(ESCAPER)
    return logger


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exception"] = record.exc_text
        return json.dumps(data, ensure_ascii=False)


REDACTOR = SecretRedactor()


NOISY_LOGGERS = (
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "telegram",
    "discord",
    "nio",
    "aiosqlite",
    "asyncio",
)
LOG_FILE_BYTES = 5 * 1024 * 1024
LOG_FILE_BACKUPS = 3


class TerminalHandler(logging.StreamHandler[TextIO]):
    """Writes to the current ``sys.stderr`` (looked up per record, not kept), so a
    ``patch_stdout`` installed after logging was configured still catches it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler.__init__ assigns it
        pass


class LogFileHandler(RotatingFileHandler):
    """The interactive run's log file, rotated; a symlinked file is refused."""

    def _open(self) -> io.TextIOWrapper:
        path = Path(self.baseFilename)
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, below=path.parent)
        return io.TextIOWrapper(
            io.FileIO(fd, "a"), encoding=self.encoding, errors=self.errors, write_through=True
        )


def configure_logging(
    level: str = "INFO", fmt: str = "text", *, log_file: Path | None = None
) -> None:
    """Install the handlers (idempotent: replaces earlier handlers).

    Without ``log_file``: every record at ``level`` on stderr. With it (the
    interactive terminal): records at ``level`` in ``log_file``, and only
    WARNING and above on the terminal. Third-party libraries log WARNING and
    above either way.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if isinstance(handler, LogFileHandler):
            handler.close()
    formatter = JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)
    handlers: list[logging.Handler] = []
    if log_file is None:
        handlers.append(logging.StreamHandler(sys.stderr))
    else:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            LogFileHandler(
                log_file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
            )
        )
        terminal = TerminalHandler()
        terminal.setLevel(logging.WARNING)
        handlers.append(terminal)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(REDACTOR)
        root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
