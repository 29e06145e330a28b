"""Files an isolated or WebAssembly tool attaches (``contract.attach``, ADR 0096),
across the boundary.

The plugin host collects a tool call's artifacts as the kernel does in process
and, when there are some, answers ``{ARTIFACTS: [...], "result": ...}`` instead
of the bare result; each artifact travels with its bytes in base64 (one at a
path is read in the host, whose data dir the kernel may not see). A wasm guest
answers ``call_tool`` the same way (host ABI 1, ADR 0085): it writes the JSON
itself. The kernel's tool proxy attaches them to the turn it serves and hands
the model the result; a malformed entry fails that call, naming what is wrong.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.extensions.contract import Artifact

__all__ = ["ARTIFACTS", "artifacts_from_wire", "artifacts_to_wire"]

ARTIFACTS = "__hearth_artifacts__"  # the answer's key when a call attached files


def artifacts_to_wire(artifacts: Iterable[Artifact]) -> list[dict[str, Any]]:
    """The host's side: each artifact as JSON, its bytes in base64."""
    wire = []
    for artifact in artifacts:
        data = artifact.data if artifact.data is not None else Path(str(artifact.path)).read_bytes()
        wire.append(
            {
                "name": artifact.name,
                "mime_type": artifact.mime_type,
                "caption": artifact.caption,
                "data": base64.b64encode(data).decode(),
            }
        )
    return wire


def artifacts_from_wire(wire: Any) -> list[Artifact]:
    """The kernel's side: the artifacts back (a malformed entry is a ``ValueError``
    naming its index and what is wrong)."""
    if not isinstance(wire, list):
        raise ValueError(f"{ARTIFACTS} must be a list, got {type(wire).__name__}")
    return [_artifact(index, item) for index, item in enumerate(wire)]


def _artifact(index: int, item: Any) -> Artifact:
    where = f"{ARTIFACTS}[{index}]"
    if not isinstance(item, dict):
        raise ValueError(f"{where} must be an object, got {type(item).__name__}")
    missing = [key for key in ("name", "mime_type", "data") if not isinstance(item.get(key), str)]
    if missing:
        raise ValueError(f"{where} needs {', '.join(missing)} (strings)")
    try:
        data = base64.b64decode(item["data"], validate=True)
    except binascii.Error:
        raise ValueError(f"{where}.data is not valid base64") from None
    try:
        return Artifact(
            item["name"], item["mime_type"], data=data, caption=str(item.get("caption", ""))
        )
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
