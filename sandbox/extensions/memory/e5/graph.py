"""The e5 encoder as an ONNX graph for ONNX Runtime, built from the 4-bit file.

Twelve post-norm BERT layers, each: one 4-bit matrix product for Q, K and V
together (``MatMulNBits`` with int8 arithmetic, ``accuracy_level`` 4), ONNX
Runtime's ``MultiHeadAttention``, the output projection,
``SkipLayerNormalization`` (residual + LayerNorm in one kernel), the
feed-forward pair around an exact (erf) ``Gelu``; then the mean over the
tokens. The weights keep their 4 bits and per-32 scales: ``Q4_0``'s nibble
order is rewritten into the one ``MatMulNBits`` reads (consecutive weights
share a byte) with its implicit zero point 8 — the same numbers, ~13 MB.

Input: the sum of word, position and type embeddings of one window of tokens,
``[1, T, hidden]``. Output: the mean of the last hidden states, ``[1, hidden]``.
"""

from __future__ import annotations

import numpy as np

from . import onnx_proto as proto
from .weights import BLOCK, Header, ModelFile

OPSETS = {"": 17, "com.microsoft": 1}
CONTRIB = "com.microsoft"
INT8_ARITHMETIC = 4  # MatMulNBits accuracy_level: activations quantised to int8 per block
FLOAT = 1
INPUT = "embedded"
OUTPUT = "pooled"
GRAPH_VERSION = 1  # part of the cached model's name: bump when the graph changes


def build_model(model: ModelFile) -> bytes:
    """The serialised ONNX model of ``model``'s encoder."""
    h = model.header
    graph = _Graph(model, h)
    x = graph.layer_norm(INPUT, "emb.ln")
    for layer in range(h.layers):
        x = graph.encoder_layer(layer, x)
    graph.node("ReduceMean", [x], OUTPUT, axes=[1], keepdims=0)
    return proto.model(
        graph.nodes,
        graph.initializers,
        [proto.value_info(INPUT, FLOAT, [1, "tokens", h.hidden])],
        [proto.value_info(OUTPUT, FLOAT, [1, h.hidden])],
        name="multilingual-e5-small-q4",
        opsets=OPSETS,
        producer="hearth-memory",
    )


class _Graph:
    def __init__(self, model: ModelFile, header: Header) -> None:
        self.model, self.h = model, header
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []

    def encoder_layer(self, layer: int, x: str) -> str:
        name, hidden, ffn = f"l{layer}", self.h.hidden, self.h.ffn
        qkv = self.matmul_4bit(
            x,
            np.concatenate([self.model.q4_matrix(f"{name}.{p}.w", hidden, hidden) for p in "qkv"]),
            np.concatenate([self.model.vector(f"{name}.{p}.b", hidden) for p in "qkv"]),
            f"{name}.qkv",
        )
        split = self.initializer(np.array([hidden] * 3, dtype=np.int64), f"{name}.split")
        q, k, v = f"{name}.q", f"{name}.k", f"{name}.v"
        self.node("Split", [qkv, split], [q, k, v], axis=-1)
        context = self.node(
            "MultiHeadAttention",
            [q, k, v],
            f"{name}.context",
            domain=CONTRIB,
            num_heads=self.h.heads,
        )
        attended = self.matmul_4bit(
            context, *self.weights(f"{name}.ao", hidden, hidden), f"{name}.ao"
        )
        x1 = self.skip_layer_norm(attended, x, f"{name}.aln")
        inner = self.matmul_4bit(x1, *self.weights(f"{name}.fi", ffn, hidden), f"{name}.fi")
        activated = self.node("Gelu", [inner], f"{name}.gelu", domain=CONTRIB)
        out = self.matmul_4bit(activated, *self.weights(f"{name}.fo", hidden, ffn), f"{name}.fo")
        return self.skip_layer_norm(out, x1, f"{name}.oln")

    def weights(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        return self.model.q4_matrix(f"{name}.w", rows, cols), self.model.vector(f"{name}.b", rows)

    def initializer(self, array: np.ndarray, name: str) -> str:
        self.initializers.append(proto.tensor(name, array))
        return name

    def node(
        self,
        op: str,
        inputs: list[str],
        outputs: str | list[str],
        domain: str = "",
        **attrs: int | float | list[int],
    ) -> str:
        names = [outputs] if isinstance(outputs, str) else outputs
        self.nodes.append(
            proto.node(op, inputs, names, name=f"{names[0]}.{op}", domain=domain, **attrs)
        )
        return names[0]

    def matmul_4bit(self, x: str, blocks: np.ndarray, bias: np.ndarray, name: str) -> str:
        rows, per_row = blocks.shape
        nibbles = blocks["nibbles"]  # byte j: weight j (low nibble), weight j + 16 (high)
        values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)
        packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
        inputs = [
            x,
            self.initializer(packed, f"{name}.w"),
            self.initializer(blocks["scale"].astype(np.float32).reshape(-1), f"{name}.scales"),
            "",
            "",
            self.initializer(bias.astype(np.float32), f"{name}.b"),
        ]
        return self.node(
            "MatMulNBits",
            inputs,
            f"{name}.out",
            domain=CONTRIB,
            K=per_row * BLOCK,
            N=rows,
            bits=4,
            block_size=BLOCK,
            accuracy_level=INT8_ARITHMETIC,
        )

    def layer_norm(self, x: str, name: str) -> str:
        gamma = self.initializer(self.model.vector(f"{name}.w", self.h.hidden), f"{name}.w")
        beta = self.initializer(self.model.vector(f"{name}.b", self.h.hidden), f"{name}.b")
        return self.node(
            "LayerNormalization", [x, gamma, beta], f"{name}.out", axis=-1, epsilon=self.h.eps
        )

    def skip_layer_norm(self, x: str, skip: str, name: str) -> str:
        gamma = self.initializer(self.model.vector(f"{name}.w", self.h.hidden), f"{name}.w")
        beta = self.initializer(self.model.vector(f"{name}.b", self.h.hidden), f"{name}.b")
        return self.node(
            "SkipLayerNormalization",
            [x, skip, gamma, beta],
            f"{name}.out",
            domain=CONTRIB,
            epsilon=self.h.eps,
        )
