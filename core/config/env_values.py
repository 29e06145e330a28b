"""Environment variables read like ``settings.yaml`` values where no type says how.

pydantic-settings turns ``HEARTH__SECTION__KEY`` into the field's type, but an
extension's config (``extensions: {ID: {KEY: VALUE}}``) has no type in the
kernel, so ``HEARTH__EXTENSIONS__HTTP_API__REPLY_TIMEOUT_S=4`` would reach the
extension as the string ``"4"`` while the same line in settings.yaml gives
the number 4. ``YamlValuedEnv`` reads each such value as YAML does: a number
or a boolean (``4`` → 4, ``0.5`` → 0.5, ``true`` → True, ``null`` → None) and a
flow list or mapping (``[a, b]``, ``{k: v}``); any other text stays the text
it was (so ``Hi: there`` or ``abc #1`` in a variable is not cut or reshaped).
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic.fields import FieldInfo
from pydantic_settings import EnvSettingsSource

__all__ = ["UNTYPED_SECTIONS", "YamlValuedEnv", "yaml_values"]

UNTYPED_SECTIONS = frozenset({"extensions"})


def yaml_values(value: Any) -> Any:
    """``value`` with every string in it that YAML reads as a number, a boolean,
    null or a flow collection replaced by that value (mappings and lists walked)."""
    if isinstance(value, dict):
        return {key: yaml_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [yaml_values(item) for item in value]
    if isinstance(value, str):
        return _scalar(value)
    return value


def _scalar(text: str) -> Any:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if loaded is None:
        return None if text.strip() in ("null", "~", "Null", "NULL") else text
    if isinstance(loaded, bool | int | float):
        return loaded
    if isinstance(loaded, list | dict) and text.lstrip()[:1] in ("[", "{"):
        return loaded
    return text


class YamlValuedEnv(EnvSettingsSource):
    """The environment source, with the untyped sections' values read as YAML."""

    def prepare_field_value(
        self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool
    ) -> Any:
        prepared = super().prepare_field_value(field_name, field, value, value_is_complex)
        return yaml_values(prepared) if field_name in UNTYPED_SECTIONS else prepared
