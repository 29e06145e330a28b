"""Files an isolated tool attaches (``contract.attach``, ADR 0096), across the boundary.

The plugin host collects a tool call's artifacts as the kernel does in process
and, when there are some, answers ``{ARTIFACTS: [...], "result": ...}`` instead
of the bare result; each artifact travels with its bytes in base64 (one at a
path is read in the host, whose data dir the kernel may not see). The kernel's
tool proxy attaches them to the turn it serves and hands the model the result.
"""

from __future__ import annotations

import base64
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
    """The kernel's side: the artifacts back (a malformed entry is a ``ValueError``)."""
    if not isinstance(wire, list):
        raise ValueError(f"{ARTIFACTS} must be a list, got {type(wire).__name__}")
    return [
        Artifact(
            str(item["name"]),
            str(item["mime_type"]),
            data=base64.b64decode(str(item["data"]), validate=True),
            caption=str(item.get("caption", "")),
        )
        for item in wire
    ]
