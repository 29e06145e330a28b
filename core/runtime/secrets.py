"""Where secrets come from: the environment, then the ``.env`` file.

Secrets are handed to extensions only through ``get_secret`` for names their
manifest declares; they are never put into settings or logged. The file is
``.env`` in the project root, or the one ``HEARTH_ENV_FILE`` names (tests and
installations that keep secrets elsewhere). ``main.py setup`` writes it with
``save_secrets``: mode 0600, other lines (and comments) kept.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values

from core.runtime.datadir import PROJECT_ROOT
from core.runtime.errors import HearthError

ENV_FILE_VARIABLE = "HEARTH_ENV_FILE"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SecretNameError(HearthError, ValueError):
    """A secret's name cannot be an environment variable's name."""


def env_file_path() -> Path:
    """The secrets file: ``$HEARTH_ENV_FILE`` or ``<project root>/.env``."""
    named = os.environ.get(ENV_FILE_VARIABLE)
    return Path(named) if named else PROJECT_ROOT / ".env"


def load_secrets(env_file: Path | None = None) -> dict[str, str]:
    """Environment variables override values from the ``.env`` file."""
    values = _file_values(env_file)
    values.update(os.environ)
    return values


def secret_file_names(env_file: Path | None = None) -> frozenset[str]:
    """The names the ``.env`` file defines: secrets by where they are kept, so the
    kernel withholds them (from a hook command's environment, say) even when the
    environment holds them too."""
    return frozenset(_file_values(env_file))


def save_secrets(values: Mapping[str, str], env_file: Path | None = None) -> Path:
    """Set ``values`` in the secrets file (replacing those names' lines, keeping
    every other line), written atomically with mode 0600; returns the file."""
    for name, value in values.items():
        if not _NAME_RE.match(name):
            raise SecretNameError(f"secret name {name!r} is not a valid environment variable name")
        if "\n" in value or "\r" in value:
            raise SecretNameError(f"secret {name}: the value holds a line break")
    path = env_file or env_file_path()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    pending = dict(values)
    kept: list[str] = []
    for line in lines:
        assigned = _assigned_name(line)
        if assigned is not None and assigned in values:
            if assigned in pending:
                kept.append(_line(assigned, pending.pop(assigned)))
            continue  # a repeated assignment of a replaced name goes
        kept.append(line)
    kept.extend(_line(name, value) for name, value in pending.items())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".env.", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(kept) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _assigned_name(line: str) -> str | None:
    text = line.strip()
    if not text or text.startswith("#") or "=" not in text:
        return None
    name = text.split("=", 1)[0].strip().removeprefix("export ").strip()
    return name or None


def _line(name: str, value: str) -> str:
    """``NAME='value'`` (single quotes: python-dotenv reads them verbatim)."""
    if "'" not in value:
        return f"{name}='{value}'"
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{name}="{escaped}"'


def _file_values(env_file: Path | None) -> dict[str, str]:
    path = env_file or env_file_path()
    if not path.is_file():
        return {}
    return {k: v for k, v in dotenv_values(path).items() if v is not None}
