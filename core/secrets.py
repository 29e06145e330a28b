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
    path = env_file or PROJECT_ROOT / ".env"
    values: dict[str, str] = {}
    if path.is_file():
        values.update({k: v for k, v in dotenv_values(path).items() if v is not None})
    values.update(os.environ)
    return values
