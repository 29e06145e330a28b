"""The memory extension's int8 vector index: the scan finds what a float search
finds, and a scan of a snapshot still finds the memories that a forget moved."""

from __future__ import annotations

import numpy as np

from sandbox.extensions.memory.vectors import CHUNK_ROWS, VectorIndex, to_blob


def unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, 384), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_the_int8_scan_ranks_as_float_vectors_do_across_chunks():
    vectors = unit_rows(3 * CHUNK_ROWS + 17, seed=1)  # a partial last chunk too
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
