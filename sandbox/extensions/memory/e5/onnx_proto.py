"""Just enough of the ONNX protobuf format to write one inference graph.

ONNX models are protobuf messages (``onnx.proto``). The ``onnx`` package would
write them, but importing it costs ~15 MB of resident memory and 31 MB on disk
for one call per model build, against a recall memory budget. What the graph
needs — nodes with int/float/ints attributes, raw tensors, typed inputs and
outputs, opset imports — is a few message types, written here field by field
with the numbers from ``onnx.proto`` (IR version 8). ONNX Runtime parses the
result; the test suite checks it with ``onnx.checker`` as well.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

IR_VERSION = 8
TENSOR_TYPES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int64): 7}
ATTR_FLOAT, ATTR_INT, ATTR_INTS = 1, 2, 7


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _tag(field, 0) + _varint(value)


def _bytes(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(payload)) + payload


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode())


def attribute(name: str, value: int | float | Sequence[int]) -> bytes:
    """An ``AttributeProto``: an int, a float or a list of ints."""
    if isinstance(value, int):  # bool included
        body = _text(1, name) + _int(3, int(value)) + _int(20, ATTR_INT)
    elif isinstance(value, float):
        body = _text(1, name) + _tag(2, 5) + struct.pack("<f", value) + _int(20, ATTR_FLOAT)
    else:
        body = _text(1, name) + b"".join(_int(8, int(v)) for v in value) + _int(20, ATTR_INTS)
    return body


def node(
    op: str,
    inputs: Iterable[str],
    outputs: Iterable[str],
    name: str,
    domain: str = "",
    **attrs: int | float | Sequence[int],
) -> bytes:
    """A ``NodeProto``."""
    body = b"".join(_text(1, i) for i in inputs) + b"".join(_text(2, o) for o in outputs)
    body += _text(3, name) + _text(4, op)
    body += b"".join(_bytes(5, attribute(key, value)) for key, value in attrs.items())
    if domain:
        body += _text(7, domain)
    return body


def tensor(name: str, array: np.ndarray) -> bytes:
    """A ``TensorProto`` with its values as little-endian ``raw_data``."""
    data = np.ascontiguousarray(array)
    body = b"".join(_int(1, d) for d in data.shape) + _int(2, TENSOR_TYPES[data.dtype])
    return (
        body
        + _text(8, name)
        + _bytes(9, data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes())
    )


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """A ``ValueInfoProto`` of a tensor; a ``str`` dimension is symbolic."""
    dims = b"".join(_bytes(1, _text(2, d) if isinstance(d, str) else _int(1, d)) for d in shape)
    tensor_type = _int(1, elem_type) + _bytes(2, dims)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    name: str,
    opsets: dict[str, int],
    producer: str,
) -> bytes:
    """A serialised ``ModelProto`` holding one graph."""
    graph = b"".join(_bytes(1, n) for n in nodes) + _text(2, name)
    graph += b"".join(_bytes(5, t) for t in initializers)
    graph += b"".join(_bytes(11, i) for i in inputs) + b"".join(_bytes(12, o) for o in outputs)
    imports = b"".join(
        _bytes(8, (_text(1, domain) if domain else b"") + _int(2, version))
        for domain, version in opsets.items()
    )
    return _int(1, IR_VERSION) + _text(2, producer) + _bytes(7, graph) + imports
