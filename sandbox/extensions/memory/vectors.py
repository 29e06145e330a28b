"""Compact vectors: int8 blobs in the memory rows, an int8 matrix in RAM.

A unit vector is stored as its largest magnitude divided by 127 (float32,
4 bytes) followed by the components scaled to int8: 388 bytes for e5's 384
dimensions instead of 1,536 as float32, with cosine scores within ~0.005 of
the float ones. The index keeps the same int8 rows in one growing matrix
(38 MB per 100,000 memories) and scans it in one worker thread, in chunks
converted into one reused float32 buffer, so no float32 copy of everything
is ever held (~5 ms per 100,000 rows on an idle core). Approximate
prefilters (sign bits, a PCA projection) lost too many true neighbours of
e5 vectors to earn their place (docs/adr/0029-local-embeddings.md).
Measured in bench/memory.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

CHUNK_ROWS = 1024  # 2,048 lets OpenBLAS start threads for a product: 10x slower on busy cores
SCALE_BYTES = 4


def to_blob(vector: np.ndarray) -> bytes:
    """``scale`` (float32) then ``round(vector / scale)`` as int8."""
    peak = float(np.max(np.abs(vector)))
    scale = peak / 127.0 if peak > 0 else 1.0
    quantised = np.clip(np.rint(vector / scale), -127, 127).astype(np.int8)
    return np.float32(scale).tobytes() + quantised.tobytes()


def from_blob(blob: bytes) -> tuple[float, np.ndarray]:
    """``(scale, int8 components)`` of a blob written by ``to_blob``."""
    scale = float(np.frombuffer(blob[:SCALE_BYTES], dtype=np.float32)[0])
    return scale, np.frombuffer(blob[SCALE_BYTES:], dtype=np.int8)


class VectorIndex:
    """The int8 rows of every embedded memory, searched by brute force.

    Not thread-safe for writes: the extension mutates it on the event loop and
    ``view`` snapshots the rows on the loop before a scan is handed to a thread;
    rows are only appended or overwritten in place, never reallocated under a
    running scan (growth allocates a new matrix and swaps it in).
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.dim: int | None = None  # the first vector decides
        self._rows = np.zeros((0, 0), dtype=np.int8)
        self._scales = np.zeros(capacity, dtype=np.float32)
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._row_of: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._row_of)

    def __contains__(self, memory_id: int) -> bool:
        return memory_id in self._row_of

    @property
    def nbytes(self) -> int:
        return int(self._rows.nbytes + self._scales.nbytes + self._ids.nbytes)

    def add_blob(self, memory_id: int, blob: bytes) -> bool:
        """Store (or replace) a memory's row; False when its dimension is not the index's."""
        scale, quantised = from_blob(blob)
        if self.dim is None:
            self.dim = len(quantised)
            self._rows = np.zeros((len(self._ids), self.dim), dtype=np.int8)
        if len(quantised) != self.dim:
            return False
        row = self._row_of.get(memory_id)
        if row is None:
            row = len(self._row_of)
            if row == len(self._ids):
                self._grow()
            self._row_of[memory_id] = row
        self._rows[row] = quantised
        self._scales[row] = scale
        self._ids[row] = memory_id
        return True

    def remove(self, memory_id: int) -> None:
        row = self._row_of.pop(memory_id, None)
        if row is None:
            return
        last = len(self._row_of)  # the former last row moves into the hole
        if row != last:
            moved = int(self._ids[last])
            self._rows[row] = self._rows[last]
            self._scales[row] = self._scales[last]
            self._ids[row] = moved
            self._row_of[moved] = row

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` vectors at once (loading a store: no doubling, no waste)."""
        if rows > len(self._ids):
            self._grow(rows)

    def _grow(self, size: int = 0) -> None:
        size = max(size, len(self._ids) * 2)
        rows = np.zeros((size, self._rows.shape[1]), dtype=np.int8)
        rows[: len(self._rows)] = self._rows
        scales = np.zeros(size, dtype=np.float32)
        scales[: len(self._scales)] = self._scales
        ids = np.zeros(size, dtype=np.int64)
        ids[: len(self._ids)] = self._ids
        self._rows, self._scales, self._ids = rows, scales, ids

    def similarities(self, ids: list[int], query: np.ndarray) -> dict[int, float]:
        """Cosine of ``query`` with each of ``ids`` that has a row (a handful: on the loop)."""
        rows = [self._row_of[i] for i in ids if i in self._row_of]
        if not rows:
            return {}
        picked = np.asarray(rows)
        scores = (self._rows[picked].astype(np.float32) @ query) * self._scales[picked]
        return {int(self._ids[r]): float(v) for r, v in zip(picked, scores, strict=True)}

    def view(self) -> IndexView:
        """The rows as they are now, for a scan in a worker thread (taken on the loop).

        Later appends grow a new matrix, a forget moves a row: the ids are
        copied so a scan never reports a row under another memory's id.
        """
        count = len(self._row_of)
        return IndexView(self._rows[:count], self._scales[:count], self._ids[:count].copy())

    async def nearest(self, query: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
        """``(id, cosine)`` of the ``k`` most similar rows at or above ``floor``, best first."""
        if len(self._row_of) == 0:
            return []
        return await asyncio.to_thread(self.view().nearest, query, k, floor)


@dataclass(frozen=True, slots=True)
class IndexView:
    """A snapshot of the index's rows; ``nearest`` blocks (run it in a worker thread)."""

    rows: np.ndarray
    scales: np.ndarray
    ids: np.ndarray

    def nearest(self, query: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
        """One pass over the int8 rows in cache-sized chunks, each converted into one
        reused float32 buffer, then a matrix-vector product (a single thread: the
        other core ranks by words meanwhile)."""
        if len(self.ids) == 0:
            return []
        return _top(_scan(self.rows, self.scales, query), self.ids, k, floor)


def _scan(rows: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    query = np.ascontiguousarray(query, dtype=np.float32)
    out = np.empty(len(rows), dtype=np.float32)
    buffer = np.empty((min(CHUNK_ROWS, len(rows)), rows.shape[1]), dtype=np.float32)
    for start in range(0, len(rows), CHUNK_ROWS):
        chunk = rows[start : start + CHUNK_ROWS]
        converted = buffer[: len(chunk)]
        np.copyto(converted, chunk, casting="unsafe")
        np.matmul(converted, query, out=out[start : start + len(chunk)])
    out *= scales
    return out


def _top(scores: np.ndarray, ids: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
    if k < len(scores):
        pick = np.argpartition(-scores, k)[:k]
    else:
        pick = np.arange(len(scores))
    pick = pick[np.argsort(-scores[pick], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in pick if scores[i] >= floor]
