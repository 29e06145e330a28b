"""Compact vectors: int8 blobs in the memory rows, an int8 matrix in RAM.

A unit vector is stored as its largest magnitude divided by 127 (float32,
4 bytes) followed by the components scaled to int8: 388 bytes for e5's 384
dimensions instead of 1,536 as float32, with cosine scores within ~0.005 of
the float ones. The index keeps the same int8 rows in one growing matrix
(38 MB per 100,000 memories) and scans it exactly with ``simsimd``'s int8
dot products (AVX2 / NEON kernels), the query scaled to int8 the same way:
~2.5 ms per 100,000 rows on two idle cores (numpy, converting chunks to
float32 for a BLAS product, took 8.7 ms on one core, ~6 on two; no float32
copy of the rows is held either way). A large index is scanned on two
threads: the scan starts once the query is embedded, and by then the word
ranking, which runs beside the embedding, is done (ADR 0037). Approximate
prefilters (sign bits, a PCA projection) lost too many true neighbours of
e5 vectors to earn their place (docs/adr/0029-local-embeddings.md).
Measured in bench/memory.py.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import numpy as np
import simsimd

SPLIT_ROWS = 16384  # from here on a scan runs on two threads (below: not worth a thread)
SCAN_THREADS = min(2, os.cpu_count() or 1)
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
        # memory id -> row (-1: none): 4 bytes per id, where a dict took ~100 per entry
        self._row_of = np.full(capacity, -1, dtype=np.int32)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, memory_id: int) -> bool:
        return self._row(memory_id) >= 0

    @property
    def nbytes(self) -> int:
        return int(self._rows.nbytes + self._scales.nbytes + self._ids.nbytes + self._row_of.nbytes)

    def add_blob(self, memory_id: int, blob: bytes) -> bool:
        """Store (or replace) a memory's row; False when its dimension is not the index's."""
        if memory_id < 0:
            raise ValueError(f"memory id {memory_id} is negative")
        scale, quantised = from_blob(blob)
        if self.dim is None:
            self.dim = len(quantised)
            self._rows = np.zeros((len(self._ids), self.dim), dtype=np.int8)
        if len(quantised) != self.dim:
            return False
        row = self._row(memory_id)
        if row < 0:
            row = self._count
            if row == len(self._ids):
                self._grow()
            if memory_id >= len(self._row_of):
                self._row_of = _grown(self._row_of, max(memory_id + 1, 2 * len(self._row_of)), -1)
            self._row_of[memory_id] = row
            self._count += 1
        self._rows[row] = quantised
        self._scales[row] = scale
        self._ids[row] = memory_id
        return True

    def remove(self, memory_id: int) -> None:
        row = self._row(memory_id)
        if row < 0:
            return
        self._row_of[memory_id] = -1
        self._count -= 1
        last = self._count  # the former last row moves into the hole
        if row != last:
            moved = int(self._ids[last])
            self._rows[row] = self._rows[last]
            self._scales[row] = self._scales[last]
            self._ids[row] = moved
            self._row_of[moved] = row

    def _row(self, memory_id: int) -> int:
        return int(self._row_of[memory_id]) if 0 <= memory_id < len(self._row_of) else -1

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` vectors at once (loading a store: no doubling, no waste)."""
        if rows > len(self._ids):
            self._grow(rows)

    def _grow(self, size: int = 0) -> None:
        size = max(size, len(self._ids) * 2)
        rows = np.zeros((size, self._rows.shape[1]), dtype=np.int8)
        rows[: len(self._rows)] = self._rows
        self._rows = rows
        self._scales = _grown(self._scales, size, 0)
        self._ids = _grown(self._ids, size, 0)

    def similarities(self, ids: list[int], query: np.ndarray) -> dict[int, float]:
        """Cosine of ``query`` with each of ``ids`` that has a row (a handful: on the loop)."""
        rows = [row for row in map(self._row, ids) if row >= 0]
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
        count = self._count
        return IndexView(self._rows[:count], self._scales[:count], self._ids[:count].copy())

    async def nearest(self, query: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
        """``(id, cosine)`` of the ``k`` most similar rows at or above ``floor``, best first."""
        if self._count == 0:
            return []
        return await asyncio.to_thread(self.view().nearest, query, k, floor)


def _grown(array: np.ndarray, size: int, fill: int) -> np.ndarray:
    bigger = np.full(size, fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


@dataclass(frozen=True, slots=True)
class IndexView:
    """A snapshot of the index's rows; ``nearest`` blocks (run it in a worker thread)."""

    rows: np.ndarray
    scales: np.ndarray
    ids: np.ndarray

    def nearest(self, query: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
        """``(id, cosine)`` of the ``k`` most similar rows at or above ``floor``, best first."""
        if len(self.ids) == 0:
            return []
        return _top(self._scores(query), self.ids, k, floor)

    def nearest_and_spread(
        self, query: np.ndarray, k: int
    ) -> tuple[list[tuple[int, float]], float]:
        """The ``k`` most similar rows, best first, and the standard deviation of the
        query's cosine over every row: the unit the ``relative`` fusion measures in."""
        if len(self.ids) == 0:
            return [], 0.0
        scores = self._scores(query)
        return _top(scores, self.ids, k, -1.0), float(np.std(scores))

    def _scores(self, query: np.ndarray) -> np.ndarray:
        """One exact pass: int8 dot products of every row with the query (itself
        scaled to int8, like the rows), times both scales."""
        peak = float(np.max(np.abs(query)))
        query_scale = peak / 127.0 if peak > 0 else 1.0
        quantised = np.clip(np.rint(query / query_scale), -127, 127).astype(np.int8)
        scores = np.empty(len(self.ids), dtype=np.float32)
        threads = SCAN_THREADS if len(self.ids) >= SPLIT_ROWS else 1
        simsimd.cdist(
            self.rows,
            quantised[None, :],
            metric="dot",
            out=scores.reshape(-1, 1),
            out_dtype="float32",
            threads=threads,
        )
        scores *= self.scales
        scores *= query_scale
        return scores


def _top(scores: np.ndarray, ids: np.ndarray, k: int, floor: float) -> list[tuple[int, float]]:
    if k < len(scores):
        pick = np.argpartition(-scores, k)[:k]
    else:
        pick = np.arange(len(scores))
    pick = pick[np.argsort(-scores[pick], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in pick if scores[i] >= floor]
