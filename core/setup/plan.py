"""What a setup run will change, and writing it: settings keys and secrets.

Settings go to the local settings layer, ``settings.local.yaml`` (only the
keys whose value changes; comments and everything else kept,
``settings_file.write_changes``; the tracked ``settings.yaml`` is never
written, ADR 0045);
secrets go to ``.env`` (mode 0600, ``core.runtime.secrets.save_secrets``). The
summary names keys and secret names, never a secret's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config import Layer, LocalServerSettings, Settings
from core.runtime import env_file_path, save_secrets
from core.setup.settings_file import KeyPath, write_changes

__all__ = [
    "LOCAL_KEY_ENV",
    "LOCAL_PROVIDER",
    "OPENAI_KEY_ENV",
    "SetupPlan",
    "local_layer",
]

OPENAI_KEY_ENV = "OPENAI_API_KEY"
LOCAL_KEY_ENV = "LOCAL_MODEL_API_KEY"
LOCAL_PROVIDER = "local"
LOCAL_TIMEOUT_S = 600.0


@dataclass
class SetupPlan:
    """Settings keys and secrets to write, gathered from the answers."""

    settings: dict[KeyPath, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    def use_model(
        self, provider: str, model: str, *, base_url: str | None, api_key_env: str | None
    ) -> None:
        """``models.default`` and its provider: ``openai`` (the key in ``api_key_env``)
        or ``openai_compatible`` at ``base_url`` (provider ``local``)."""
        name = "openai" if provider == "openai" else LOCAL_PROVIDER
        base = ("models", "providers", name)
        self.settings[(*base, "type")] = provider
        if provider == "openai_compatible":
            self.settings[(*base, "base_url")] = base_url
        if api_key_env or provider == "openai":
            self.settings[(*base, "api_key_env")] = api_key_env or OPENAI_KEY_ENV
        self.settings[("models", "default")] = {"provider": name, "model": model}

    def use_local_model(self, local: LocalServerSettings, model: str) -> None:
        """The installed local model as the default, its server started beside the
        kernel (``models.local_server.start``, ADR 0098). Its provider and a turn wait
        up to ``LOCAL_TIMEOUT_S``: a small CPU reads a whole prompt for minutes (the
        first message after a start, before the warm prefix is ready)."""
        self.use_model("openai_compatible", model, base_url=local.base_url, api_key_env=None)
        self.settings[("models", "providers", LOCAL_PROVIDER, "timeout_s")] = LOCAL_TIMEOUT_S
        self.settings[("turns", "timeout_s")] = LOCAL_TIMEOUT_S
        self.settings[("models", "local_server", "start")] = True

    def use_price(self, model: str, input: float, cached_input: float, output: float) -> None:
        """``models.prices.<model>`` per million tokens (ADR 0061)."""
        price = {"input": input, "cached_input": cached_input, "output": output}
        self.settings[("models", "prices", model)] = price

    def use_timezone(self, zone: str) -> None:
        self.settings[("timezone",)] = zone

    def write(
        self, settings_file: Path, env_file: Path | None = None, below: tuple[Layer, ...] = ()
    ) -> list[str]:
        """Write what changed into ``settings_file`` (over the layers ``below`` it)
        and the secrets file; one line per file for the user."""
        lines: list[str] = []
        changed = write_changes(settings_file, self.settings, below) if self.settings else []
        if changed:
            lines.append(f"{settings_file}: set {', '.join(changed)}")
        if self.secrets:
            path = save_secrets(self.secrets, env_file or env_file_path())
            lines.append(f"{path} (mode 0600): set {', '.join(sorted(self.secrets))}")
        return lines or ["nothing changed"]


def local_layer(settings: Settings) -> tuple[Path, tuple[Layer, ...]]:
    """Where setup writes (the local layer, ADR 0045) and the layers below it."""
    target = settings.local_settings_file
    return target, tuple(layer for layer in settings.layers if layer.path.resolve() != target)
