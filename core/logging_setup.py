"""Process-wide logging: one line per record on stderr, secrets redacted.

Format ``time level logger: message`` (extensions log as ``ext.<id>``), or
one JSON object per line with ``logging.format: json``. Values of every
secret the kernel knows are replaced by ``***`` before a record is written.
Text an extension logs has its control characters escaped
(``ExtensionLogEscaper``), so it cannot forge a line of its own.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from typing import Any

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


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Install the stderr handler (idempotent: replaces earlier handlers)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(REDACTOR)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "openai", "telegram", "aiosqlite", "asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
