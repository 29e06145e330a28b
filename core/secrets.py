"""Where secrets come from: the environment, then ``.env`` in the project root.

Secrets are handed to extensions only through ``get_secret`` for names their
manifest declares; they are never put into settings or logged.
"""

from __future__ import annotations

import os
from pathlib import Path

from dotenv import dotenv_values

from core.settings import PROJECT_ROOT


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


def _file_values(env_file: Path | None) -> dict[str, str]:
    path = env_file or PROJECT_ROOT / ".env"
    if not path.is_file():
        return {}
    return {k: v for k, v in dotenv_values(path).items() if v is not None}
