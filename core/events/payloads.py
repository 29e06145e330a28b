"""The JSON form of event payloads: what is journaled, and each subscriber's copy of it.

Every publish encodes and every delivery decodes, so both skip the per-call
set-up of ``json.dumps``/``json.loads`` and use CPython's C codec directly.
A handler always gets a payload decoded from the journaled text — its own
copy, identical to what a redelivery after a restart would see.
"""

from __future__ import annotations

import _json
import json
from typing import Any

from core.events.errors import PayloadError, PayloadTooLargeError

__all__ = ["decode_payload", "encode_payload"]


def _unencodable(value: object) -> None:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Compact, UTF-8 kept as is, NaN/Infinity rejected. No ``markers`` dict: a
# circular payload ends in RecursionError instead, reported as a PayloadError.
_ENCODE = _json.make_encoder(
    None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, False
)
_DECODER = json.JSONDecoder()


def encode_payload(topic: str, payload: object, max_bytes: int | None = None) -> str:
    """The journaled text of ``payload``; ``PayloadError`` unless it is a JSON object.

    With ``max_bytes``, text longer than that in UTF-8 raises
    ``PayloadTooLargeError`` naming the topic and the size.
    """
    if not isinstance(payload, dict):
        raise PayloadError(topic, f"got {type(payload).__name__}")
    try:
        text = "".join(_ENCODE(payload, 0))
    except RecursionError as exc:
        raise PayloadError(topic, "circular reference or nesting too deep") from exc
    except (TypeError, ValueError) as exc:
        raise PayloadError(topic, str(exc)) from exc
    # UTF-8 takes 1 to 4 bytes a character: encode only when the length leaves it open.
    if max_bytes is not None and len(text) * 4 > max_bytes:
        size = len(text) if len(text) > max_bytes else len(text.encode())
        if size > max_bytes:
            raise PayloadTooLargeError(topic, size, max_bytes)
    return text


def decode_payload(text: str) -> dict[str, Any]:
    """A fresh dict from text ``encode_payload`` wrote (no surrounding whitespace to skip)."""
    payload: dict[str, Any] = _DECODER.raw_decode(text)[0]
    return payload
