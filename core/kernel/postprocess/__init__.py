"""Answer post-processors (SPEC §9–10, seed 000, ADR 0023): ``#name:param`` after a
message turns the answer into structured output. Parsing, the catalog of
processors, per-user activations, the serial runner, the records kept with
each turn, the follow-up rendering, and the ``/ext`` and ``/last`` commands."""

from core.kernel.postprocess.activations import Activation, ActivationError, ActivationStore
from core.kernel.postprocess.catalog import CatalogEntry, PostProcessorCatalog, processor_names
from core.kernel.postprocess.commands import postprocess_commands
from core.kernel.postprocess.parsing import PostQuery, PostSpec, parse_query
from core.kernel.postprocess.records import PostRecords, PostTurnRecord
from core.kernel.postprocess.runner import PostProcessRunner
from core.kernel.postprocess.service import (
    Count,
    PostOutcome,
    PostProcessing,
    Resolve,
    orchestrator_model,
)

__all__ = [
    "Activation",
    "ActivationError",
    "ActivationStore",
    "CatalogEntry",
    "Count",
    "PostOutcome",
    "PostProcessRunner",
    "PostProcessing",
    "PostProcessorCatalog",
    "PostQuery",
    "PostRecords",
    "PostSpec",
    "PostTurnRecord",
    "Resolve",
    "orchestrator_model",
    "parse_query",
    "postprocess_commands",
    "processor_names",
]
