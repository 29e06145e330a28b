"""The memory extension's int8 vector index: the scan finds what a float search
finds, and a scan of a snapshot still finds the memories that a forget moved."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.extensions.memory.vectors import SPLIT_ROWS, VectorIndex, to_blob


def unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, 384), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("size", [3000, SPLIT_ROWS + 17], ids=["one thread", "two threads"])
async def test_the_int8_scan_ranks_as_float_vectors_do(size: int):
    vectors = unit_rows(size, seed=1)
    index = VectorIndex()
    for memory_id, vector in enumerate(vectors, start=1):
        index.add_blob(memory_id, to_blob(vector))
    query = vectors[2500] * 0.8 + unit_rows(1, seed=2)[0] * 0.2
    query /= np.linalg.norm(query)

    found = await index.nearest(query, 10, floor=-1.0)

    exact = np.argsort(-(vectors @ query))[:10] + 1
    assert found[0][0] == 2501
    assert len({i for i, _ in found} & set(exact.tolist())) >= 9
    cosines = dict(found)
    assert abs(cosines[2501] - float(vectors[2500] @ query)) < 0.01


async def test_a_scan_running_while_a_memory_is_forgotten_still_finds_the_others():
    vectors = unit_rows(50, seed=3)
    index = VectorIndex()
    for memory_id, vector in enumerate(vectors, start=1):
        index.add_blob(memory_id, to_blob(vector))
    view = index.view()  # taken on the loop; the scan runs later in a thread
    index.remove(7)  # the last row (memory 50) moves into memory 7's place

    assert 50 in {i for i, _ in view.nearest(vectors[49], 2, floor=-1.0)}
    assert (await index.nearest(vectors[49], 1, floor=-1.0))[0][0] == 50
    assert 7 not in {i for i, _ in await index.nearest(vectors[6], 50, floor=-1.0)}
    assert len(index) == 49


async def test_ids_far_apart_and_reused_rows_map_to_the_right_memories():
    vectors = unit_rows(4, seed=4)
    index = VectorIndex(capacity=2)
    for memory_id, vector in zip((3, 70_000, 5, 1_000_000), vectors, strict=True):
        index.add_blob(memory_id, to_blob(vector))
    index.remove(70_000)
    index.add_blob(70_000, to_blob(vectors[1]))  # forgotten, then stored again
    index.add_blob(5, to_blob(vectors[3]))  # replaced in place

    assert len(index) == 4 and 1_000_000 in index and 4 not in index
    assert (await index.nearest(vectors[1], 1, floor=-1.0))[0][0] == 70_000
    assert {i for i, _ in await index.nearest(vectors[3], 2, floor=-1.0)} == {5, 1_000_000}
    with pytest.raises(ValueError, match="negative"):
        index.add_blob(-1, to_blob(vectors[0]))
