"""The built-in post-processors (seed 000): deterministic, no model call."""

from core.kernel.postprocess.builtin.classify import Classify
from core.kernel.postprocess.builtin.decision import Decision
from core.kernel.postprocess.builtin.extract import Extract
from core.kernel.postprocess.builtin.json_output import JsonOutput

__all__ = ["Classify", "Decision", "Extract", "JsonOutput", "builtin_processors"]


def builtin_processors() -> list[JsonOutput | Decision | Extract | Classify]:
    """One instance of each built-in, in the order ``/ext`` lists them."""
    return [JsonOutput(), Decision(), Extract(), Classify()]
