"""The embedding model's own process: requests on stdin, unit vectors on stdout.

``ProcessEmbedder`` (``model_process.py``) starts it with ``python -c BOOT`` when
``embeddings.idle_exit_s`` is set, and stops it by closing its stdin once it has
been idle that long, so the model and its engine are resident only while memory
embeds (docs/adr/0104-the-embedding-model-in-its-own-process.md). The kernel's
death closes the pipe as well: this process never outlives it.

Protocol, one exchange per line: a request is a JSON line ``{"id": n,
"texts": [...], "role": "query" | "passage"}``; its answer is a JSON line
``{"id": n, "rows": r, "dim": d}`` followed by ``r * d`` little-endian float32,
or ``{"id": n, "error": "..."}``. The first line out is ``{"ready": true,
"dim": d, "engine": "..."}`` once the model is loaded (or ``{"error": ...}``
and exit 1). Two requests run at once, so a query does not wait behind a page
of the background backfill (ONNX Runtime sessions allow concurrent runs).
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

CONCURRENT = 2  # a turn's query beside a backfill page


def main(argv: list[str]) -> int:
    """``argv``: the model cache directory and the threads of each run."""
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not break the framing
    cache_dir, threads = Path(argv[0]), int(argv[1])
    try:
        import onnxruntime

        from . import E5Encoder

        encoder = E5Encoder(cache_dir, threads)
        encoder.embed(["warm up"], "query")  # first-call costs paid here, not by a turn
    except Exception as exc:
        _send(out, threading.Lock(), {"error": f"{type(exc).__name__}: {exc}"})
        return 1
    lock = threading.Lock()
    engine = f"onnxruntime {onnxruntime.__version__}"
    _send(out, lock, {"ready": True, "dim": encoder.dim, "engine": engine})
    with ThreadPoolExecutor(CONCURRENT, thread_name_prefix="embed") as pool:
        for line in sys.stdin.buffer:  # until the kernel closes the pipe
            pool.submit(_answer, encoder, json.loads(line), out, lock)
    return 0


def _answer(encoder: Any, request: dict[str, Any], out: BinaryIO, lock: threading.Lock) -> None:
    try:
        rows = encoder.embed(request["texts"], request["role"])
    except Exception as exc:
        _send(out, lock, {"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})
        return
    header = {"id": request["id"], "rows": rows.shape[0], "dim": rows.shape[1]}
    _send(out, lock, header, rows.astype("<f4").tobytes())


def _send(out: BinaryIO, lock: threading.Lock, header: dict[str, Any], body: bytes = b"") -> None:
    with lock:
        out.write(json.dumps(header).encode() + b"\n" + body)
        out.flush()
