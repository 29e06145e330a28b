"""Process-wide logging: one line per record on stderr, secrets redacted.

Format ``time level logger: message`` (extensions log as ``ext.<id>``), or
one JSON object per line with ``logging.format: json``. Values of every
secret the kernel knows are replaced by ``***`` before a record is written.
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
