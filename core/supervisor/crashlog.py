"""The last lines a kernel wrote, and a one-line summary of why it crashed.

The kernel logs one line per record (``<date> <time> ERROR ext.foo: message``)
with tracebacks as extra lines; the summary names the logger (usually the
extension) and the exception, so a user who finds the supervisor gone knows
where to look.
"""

from __future__ import annotations

import re
import signal
import threading
from collections import deque
from collections.abc import Iterable

TAIL_LINES = 200

_ERROR_LINE = re.compile(r"^\S+ \S+ (?:ERROR|CRITICAL) (?P<rest>.+)$")
_TRACEBACK_START = "Traceback (most recent call last):"


class OutputTail:
    """The last ``TAIL_LINES`` lines of one kernel's output (thread-safe)."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()

    def append(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)


def describe_exit(returncode: int) -> str:
    """``exit code 3`` or ``killed by signal SIGKILL``."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    return f"killed by signal {name}"


def summarize_crash(lines: Iterable[str], returncode: int) -> str:
    """The last logged error and exception of a crashed kernel, in one line."""
    error, exception = _last_error_and_exception(list(lines))
    how = describe_exit(returncode)
    if error and exception and exception not in error:
        return f"{error} [{exception}] ({how})"
    if error or exception:
        return f"{error or exception} ({how})"
    return f"no error was logged ({how})"


def _last_error_and_exception(lines: list[str]) -> tuple[str | None, str | None]:
    error: str | None = None
    exception: str | None = None
    in_traceback = False
    for line in lines:
        if line.startswith(_TRACEBACK_START):
            in_traceback = True
            continue
        if in_traceback and line and not line[0].isspace():
            # First unindented line after the frames: "SomeError: message".
            exception = line.strip()
            in_traceback = False
            continue
        match = _ERROR_LINE.match(line)
        if match:
            error, exception = match.group("rest").strip(), None
    return error, exception
