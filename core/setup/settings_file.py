"""Change a few keys of a settings file and keep everything else as it was.

``main.py setup`` writes the user's answers into the local layer
(``settings.local.yaml``, ADR 0045), never into the tracked ``settings.yaml``
beneath it: a key whose value the layers beneath already give is not
written. The user may comment and edit the local file too; ruamel.yaml's
round trip keeps comments, the key order and flow-style mappings
(``{provider: openai, model: gpt-5-mini}``), so it still reads as the user
left it with only the answered keys changed. The result is validated as
settings, over the layers beneath, before it replaces the file.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter

from core.config import Layer, Settings, SettingsError, merge, validated

HEADER = """\
Your settings: what you (or `main.py setup`) changed from the defaults in the
tracked settings file beside this one, which stays as shipped. Keys here win
over it; HEARTH__SECTION__KEY environment variables win over both. This file
is not tracked by git; `main.py doctor` lists every changed key and its place."""

__all__ = ["KeyPath", "SettingsChanges", "write_changes"]

KeyPath = tuple[str, ...]
SettingsChanges = Mapping[KeyPath, Any]


def write_changes(path: Path, changes: SettingsChanges, below: tuple[Layer, ...] = ()) -> list[str]:
    """Set every ``(key path) -> value`` in the file at ``path`` (created with a
    header comment when missing) over the layers ``below`` it, and return the
    dotted keys whose value changed; nothing is written when none did. Raises
    ``SettingsError`` when the result would not load, naming the file and key."""
    yaml = _round_trip()
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    document = yaml.load(text) if text.strip() else None
    if document is None:
        document = CommentedMap()
        document.yaml_set_start_comment(HEADER)
    if not isinstance(document, CommentedMap):
        raise SettingsError(f"{path}: top level must be a mapping")
    beneath: dict[str, Any] = {}
    for layer in below:
        beneath = merge(beneath, layer.data)
    changed = [
        ".".join(keys)
        for keys, value in changes.items()
        if _differs(document, beneath, keys, value) and _set(document, keys, value)
    ]
    if not changed:
        return []
    out = io.StringIO()
    yaml.dump(document, out)
    _check(path, out.getvalue(), below)
    _replace(path, out.getvalue())
    return changed


def _round_trip() -> YAML:
    yaml = YAML()  # round-trip mode
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long line the user wrote on one
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.representer.add_representer(type(None), _null)
    return yaml


def _null(representer: RoundTripRepresenter, _: None) -> Any:
    """``null`` as the file writes it, not an empty value."""
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _node(value: Any) -> Any:
    """An answer as a node: lists in flow style (``[42, 7]``), like the file's."""
    if isinstance(value, list | tuple):
        seq = CommentedSeq(_node(v) for v in value)
        seq.fa.set_flow_style()
        return seq
    if isinstance(value, dict):
        mapping = CommentedMap((k, _node(v)) for k, v in value.items())
        return mapping
    return value


def _differs(
    document: CommentedMap, beneath: Mapping[str, Any], keys: Sequence[str], value: Any
) -> bool:
    """Whether ``value`` is not what the file (or, where it says nothing, the
    layers beneath it) gives ``keys`` now."""
    for data in (document, beneath):
        node: Any = data
        for key in keys:
            if not isinstance(node, Mapping) or key not in node:
                break
            node = node[key]
        else:
            return bool(_plain(node) != _plain(value))
    return True


def _set(document: CommentedMap, keys: Sequence[str], value: Any) -> bool:
    """Set ``keys`` to ``value`` (creating mappings on the way); whether it changed."""
    node = document
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = CommentedMap()
            node[key] = child
        node = child
    last = keys[-1]
    if last in node and _plain(node[last]) == _plain(value):
        return False
    if isinstance(value, dict) and isinstance(node.get(last), CommentedMap):
        existing = node[last]  # keep its style (flow or block) and comments
        for key in [k for k in existing if k not in value]:
            del existing[key]
        for key, item in value.items():
            existing[key] = _node(item)
    else:
        node[last] = _node(value)
    return True


def _plain(value: Any) -> Any:
    """A ruamel node as plain Python data, for comparing with an answer."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _check(path: Path, text: str, below: tuple[Layer, ...]) -> None:
    """The settings the new text gives over ``below`` load (errors name ``path``)."""
    data = YAML(typ="safe").load(text) or {}
    validated(Settings, (*below, Layer(path, data)))


def _replace(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".settings.", suffix=".yaml", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
